package com.alibaba.nacos.lock.model;

import java.io.Serializable;

/** Nacos 3.3's queued waiter: package, fields and modifiers as in Nacos. */
public class WaitEntry implements Serializable {

    private static final long serialVersionUID = 1L;

    private String owner;

    private String connectionId;

    private long enqueueTime;

    private long waitDeadline;

    public WaitEntry() {
    }

    public WaitEntry(String owner, String connectionId, long enqueueTime, long waitDeadline) {
        this.owner = owner;
        this.connectionId = connectionId;
        this.enqueueTime = enqueueTime;
        this.waitDeadline = waitDeadline;
    }
}
