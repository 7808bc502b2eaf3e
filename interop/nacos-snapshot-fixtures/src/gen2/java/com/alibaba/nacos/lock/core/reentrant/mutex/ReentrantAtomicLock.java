package com.alibaba.nacos.lock.core.reentrant.mutex;

import com.alibaba.nacos.lock.core.reentrant.AbstractAtomicLock;

/** Nacos 3.3's REENTRANT lock: no fields of its own. */
public class ReentrantAtomicLock extends AbstractAtomicLock {

    private static final long serialVersionUID = 1L;

    public ReentrantAtomicLock(String key) {
        super(key);
    }
}
