package com.example;

import java.io.Serializable;

/** A class no Nacos lock snapshot contains, for the refusal fixture. */
public class Evil implements Serializable {

    private static final long serialVersionUID = 1L;

    private String payload = "rm -rf /";
}
