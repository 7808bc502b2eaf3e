// Package compat maps what Nacos users already write (Nacos property names
// and files) onto nacos-lockd's configuration. Only cmd imports it.
package compat
