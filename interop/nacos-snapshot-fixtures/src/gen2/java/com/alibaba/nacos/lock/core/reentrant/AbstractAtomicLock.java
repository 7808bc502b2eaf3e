package com.alibaba.nacos.lock.core.reentrant;

import com.alibaba.nacos.lock.model.WaitEntry;

import java.io.Serializable;
import java.lang.reflect.Field;
import java.util.LinkedList;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Nacos 3.3's lock base class as Hessian sees it: the same package, fields, modifiers and
 * initialisers (key, owner, connectionId, reentrantCount, expiredTimestamp, the final
 * LinkedList waitQueue, and the transient ReentrantLock that Hessian skips). The lock logic is
 * left out; the fixture methods below set the state directly and are not part of Nacos.
 */
public abstract class AbstractAtomicLock implements Serializable {

    private static final long serialVersionUID = -3460985546856855524L;

    private final String key;

    protected String owner;

    protected String connectionId;

    protected int reentrantCount;

    protected long expiredTimestamp;

    private final LinkedList<WaitEntry> waitQueue = new LinkedList<>();

    protected transient ReentrantLock lock = new ReentrantLock();

    public AbstractAtomicLock(String key) {
        this.key = key;
    }

    public String getKey() {
        return key;
    }

    /** Fixture only: the state a grant leaves. */
    public void hold(String owner, String connectionId, int reentrantCount, long expiredTimestamp) {
        this.owner = owner;
        this.connectionId = connectionId;
        this.reentrantCount = reentrantCount;
        this.expiredTimestamp = expiredTimestamp;
    }

    /** Fixture only: queue a waiter, as addWaiter does with its own clock. */
    public void enqueue(WaitEntry entry) {
        waitQueue.add(entry);
    }

    /** Fixture only: put anything in the queue (for the malformed fixtures). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    public void enqueueRaw(Object o) {
        ((LinkedList) waitQueue).add(o);
    }

    /** Fixture only: the queue as itself, for a cycle. */
    public Object queue() {
        return waitQueue;
    }

    /**
     * Fixture only: a null queue, as a 3.3 node writes an entry it loaded from a Gen 1 snapshot
     * (Hessian creates objects without running field initialisers).
     */
    public void nullQueue() throws ReflectiveOperationException {
        Field f = AbstractAtomicLock.class.getDeclaredField("waitQueue");
        f.setAccessible(true);
        f.set(this, null);
    }
}
