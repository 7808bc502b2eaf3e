package com.alibaba.nacos.lock.core.reentrant.mutex;

import com.alibaba.nacos.lock.core.reentrant.AbstractAtomicLock;

/** Nacos 3.3's NON_REENTRANT lock: no fields of its own. */
public class NonReentrantAtomicLock extends AbstractAtomicLock {

    private static final long serialVersionUID = 1L;

    public NonReentrantAtomicLock(String key) {
        super(key);
    }
}
