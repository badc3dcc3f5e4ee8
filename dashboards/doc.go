// Package dashboards holds the Grafana dashboards of caddy-posts' metrics, as JSON to import
// (caddy-posts.json). It has no code; its test keeps every query of a dashboard valid PromQL over
// metrics that package metrics or Caddy defines, and every metric of package metrics on a panel.
package dashboards
