#!/bin/bash
# Render the nri-qos chart offline: `helm template` where Helm is installed, else the small
# renderer deploy/helm/render/render.go (Go text/template + sprig, as Helm; Debian's golang-go,
# golang-github-masterminds-sprig-dev, golang-gopkg-yaml.v3-dev: scripts/deps.sh pkg), built
# into build/helm-render/ on first use. As Helm does, the values (values.yaml, -f files, --set)
# are first checked against the chart's values.schema.json (check-values.py, Debian's
# python3-jsonschema: scripts/deps.sh pkg): values it refuses stop the rendering, one line per
# error on stderr, exit 1.
# Usage: deploy/helm/render.sh [-f VALUES.yaml]... [--set key=value]...   (output on stdout)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CHART=$ROOT/deploy/helm/nri-qos
if command -v helm >/dev/null 2>&1; then
  exec helm template nri-qos "$CHART" --namespace kube-system "$@"
fi
B=$ROOT/build/helm-render
BIN=$B/render
if [ ! -x "$BIN" ] || [ "$ROOT/deploy/helm/render/render.go" -nt "$BIN" ]; then
  command -v go >/dev/null || { echo "render.sh: neither helm nor go (Debian golang-go) installed" >&2; exit 2; }
  G=$B/gopath
  rm -rf "$G" && mkdir -p "$G/src/nriqos-render" "$G/src/github.com/Masterminds/sprig" "$G/src/github.com/Masterminds/semver"
  # GOPATH mode over Debian's /usr/share/gocode; the /v3 import paths of sprig and semver point
  # at Debian's unversioned directories.
  ln -s /usr/share/gocode/src/github.com/Masterminds/sprig "$G/src/github.com/Masterminds/sprig/v3"
  ln -s /usr/share/gocode/src/github.com/Masterminds/semver "$G/src/github.com/Masterminds/semver/v3"
  cp "$ROOT/deploy/helm/render/render.go" "$G/src/nriqos-render/"
  (cd "$G/src/nriqos-render" && GO111MODULE=off GOPATH="$G:/usr/share/gocode" GOCACHE="$B/cache" GOFLAGS= \
     go build -o "$BIN" .) || { echo "render.sh: building the renderer failed" >&2; exit 2; }
fi
if [ -f "$CHART/values.schema.json" ]; then
  VJ=$(mktemp "$B/values.XXXXXX")
  trap 'rm -f "$VJ"' EXIT
  "$BIN" "$CHART" "$@" --values-json "$VJ"
  /usr/bin/python3 "$ROOT/deploy/helm/check-values.py" "$CHART/values.schema.json" "$VJ"
  "$BIN" "$CHART" "$@"
  exit 0
fi
exec "$BIN" "$CHART" "$@"
