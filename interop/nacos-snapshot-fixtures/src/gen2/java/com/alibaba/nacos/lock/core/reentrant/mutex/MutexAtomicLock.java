package com.alibaba.nacos.lock.core.reentrant.mutex;

import com.alibaba.nacos.lock.core.reentrant.AbstractAtomicLock;

/**
 * Nacos 3.3's NACOS_LOCK class. Its own fields, state and legacyMigrated, are transient, so
 * Hessian writes the same six fields as the other two classes.
 */
public class MutexAtomicLock extends AbstractAtomicLock {

    private static final long serialVersionUID = -3460985546826855524L;

    @SuppressWarnings("unused")
    private transient Integer state;

    @SuppressWarnings("unused")
    private transient boolean legacyMigrated;

    public MutexAtomicLock(String key) {
        super(key);
    }
}
