// Package compat maps what Nacos users already write onto nacos-lockd:
// Nacos property names and files (application.properties, cluster.conf),
// and Nacos lock snapshots, which it reads for import. Only cmd imports it.
package compat
