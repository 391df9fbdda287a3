#!/usr/bin/env bash
# Offline checks of deploy/k8s (CI; no cluster is reachable there):
#   1. kubectl kustomize renders base/ and the gpu/ and tls/ overlays;
#   2. kubectl reads every rendered object (`kubectl label --local`, which
#      parses without a server);
#   3. check_manifests.py checks fields and cross-references (ports, probes,
#      selectors, headless service, addresses in the daemons' flags, the
#      token Secret mounted and named by --token_file, GPU limits), and must
#      reject a copy with a broken probe port and one without the token;
#   4. only if a cluster answers (KUBECONFIG): kubectl apply --dry-run=server.
# kubectl is Debian's kubernetes-client (deploy/install-deps.sh k8s) or any
# kubectl already on PATH. `kubectl apply --dry-run=client` is not run
# offline: it needs the API server's discovery even with --validate=false.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v kubectl >/dev/null || ! python3 -c 'import yaml' 2>/dev/null; then
  bash ../install-deps.sh k8s >/dev/null
fi
T=$(mktemp -d /tmp/gradsync-k8s-check.XXXXXX)
trap 'rm -rf "$T"' EXIT
# Rendering and parsing use no cluster: an empty kubeconfig unless one is set.
USER_KUBECONFIG=${KUBECONFIG:-}
[ -n "$USER_KUBECONFIG" ] || [ ! -f ~/.kube/config ] || USER_KUBECONFIG=~/.kube/config
printf 'apiVersion: v1\nkind: Config\n' >"$T/no-cluster"
export KUBECONFIG=$T/no-cluster
kubectl kustomize base >"$T/base.yaml" 2>"$T/err" || { cat "$T/err"; exit 1; }
kubectl kustomize gpu >"$T/gpu.yaml" 2>"$T/err" || { cat "$T/err"; exit 1; }
kubectl kustomize tls >"$T/tls.yaml" 2>"$T/err" || { cat "$T/err"; exit 1; }
for f in base gpu tls; do
  kubectl label --local -f "$T/$f.yaml" checked=yes -o name >"$T/$f.names"
  echo "k8s-check: $f renders $(wc -l <"$T/$f.names") objects: $(tr '\n' ' ' <"$T/$f.names")"
done
python3 check_manifests.py "$T/base.yaml"
python3 check_manifests.py "$T/gpu.yaml" --gpu
python3 check_manifests.py "$T/tls.yaml" --tls
if python3 check_manifests.py "$T/base.yaml" --tls >/dev/null; then
  echo "k8s-check: check_manifests.py --tls accepted the base (no TLS)" >&2; exit 1
fi
# The checker must be able to fail.
sed 's/containerPort: 7000/containerPort: 7001/' "$T/base.yaml" >"$T/broken.yaml"
if python3 check_manifests.py "$T/broken.yaml" >/dev/null; then
  echo "k8s-check: check_manifests.py accepted a broken probe port" >&2; exit 1
fi
grep -v -- '--token_file=' "$T/base.yaml" >"$T/no-token.yaml"
if python3 check_manifests.py "$T/no-token.yaml" >/dev/null; then
  echo "k8s-check: check_manifests.py accepted a daemon without the token" >&2; exit 1
fi
export KUBECONFIG=$USER_KUBECONFIG
if [ -n "$KUBECONFIG" ] && timeout 20 kubectl version >/dev/null 2>&1; then
  kubectl apply --dry-run=server -k base
  echo "k8s-check: server-side dry run passed"
else
  echo "k8s-check: no cluster reachable: server-side apply/dry-run not run"
fi
echo "k8s-check: OK"
