// Package grafana holds the Grafana dashboard of nacos-lockd
// (nacos-lockd.json, import it into Grafana). It has no code: its test
// checks that the dashboard is valid JSON and that every query names only
// series, labels and label values the server exports.
package grafana
