// Package deploy holds no code: it owns the deployment files beside it (the
// Helm chart under helm/, the systemd unit under systemd/, the Grafana
// dashboard under grafana/) and its tests check them and the repository's
// Dockerfile: helm lint and helm template, systemd-analyze verify, a static
// build with the Dockerfile's command, and every dashboard query evaluated
// by a real Prometheus scraping a running agent.
package deploy
