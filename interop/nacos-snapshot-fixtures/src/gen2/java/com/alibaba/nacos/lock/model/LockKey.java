package com.alibaba.nacos.lock.model;

import java.io.Serializable;
import java.util.Objects;

/**
 * Nacos 3.3's lock map key, with its package name and fields (lockType, key). Gen 1 has the
 * same class; this copy lives in the Gen 2 class loader.
 */
public class LockKey implements Serializable {

    private static final long serialVersionUID = -5413306393656329385L;

    private String lockType;

    private String key;

    public LockKey(String lockType, String key) {
        this.lockType = lockType;
        this.key = key;
    }

    public String getLockType() {
        return lockType;
    }

    public String getKey() {
        return key;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof LockKey)) {
            return false;
        }
        LockKey other = (LockKey) o;
        return Objects.equals(lockType, other.lockType) && Objects.equals(key, other.key);
    }

    @Override
    public int hashCode() {
        return Objects.hash(lockType, key);
    }
}
