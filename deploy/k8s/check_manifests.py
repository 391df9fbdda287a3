#!/usr/bin/env python3
"""Offline checks of gradsync's rendered Kubernetes manifests (deploy/k8s/check.sh).

  check_manifests.py RENDERED.yaml [--gpu] [--tls]

No cluster is needed (none is reachable in CI), so this is not the API
server's validation: it checks the fields these manifests use against the
Kubernetes API's types and the references between objects:
  - kinds with their apiVersion, DNS-1123 names, one namespace;
  - workloads: selector labels match the pod template, containers have a name,
    an image and integer ports, every gRPC probe targets a declared port;
  - Services select some workload and target ports it declares; a
    StatefulSet's serviceName is a headless Service;
  - a Job's restartPolicy is Never or OnFailure;
  - every HOST:PORT in --coordinator / --server / --ps_shards / --advertise
    names a Service (or a pod under a headless one) that serves that port;
  - every gradsync container reads the cluster token from the Secret
    gradsync-token: --token_file=DIR/token with DIR a read-only mount of it;
  - --gpu: every worker container limits nvidia.com/gpu;
  - --tls: every gradsync container has --tls_cert/--tls_key/--tls_ca in a
    read-only mount of the Secret gradsync-tls, and no probe is a gRPC probe
    (the kubelet's cannot pass mutual TLS).
Prints one line per problem and exits 1 if there is any.
"""
import re
import sys

import yaml

KINDS = {"Namespace": "v1", "Service": "v1", "Deployment": "apps/v1",
         "StatefulSet": "apps/v1", "Job": "batch/v1"}
WORKLOADS = ("Deployment", "StatefulSet", "Job")
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
ADDR_FLAGS = ("--coordinator=", "--server=", "--ps_shards=", "--advertise=")


class Checker:
    def __init__(self, docs):
        self.docs = [d for d in docs if d]
        self.errors = []

    def err(self, doc, msg):
        self.errors.append("%s/%s: %s" % (doc.get("kind"),
                                          doc.get("metadata", {}).get("name"), msg))

    def of_kind(self, *kinds):
        return [d for d in self.docs if d.get("kind") in kinds]

    def pod_spec(self, w):
        return w.get("spec", {}).get("template", {}).get("spec", {})

    def ports_of(self, w):
        return {p.get("containerPort") for c in self.pod_spec(w).get("containers", [])
                for p in c.get("ports", [])}

    def check_object(self, d):
        kind = d.get("kind")
        if kind not in KINDS:
            return self.err(d, "unknown kind")
        if d.get("apiVersion") != KINDS[kind]:
            self.err(d, "apiVersion %r, want %r" % (d.get("apiVersion"), KINDS[kind]))
        name = d.get("metadata", {}).get("name", "")
        if not DNS1123.match(name) or len(name) > 63:
            self.err(d, "name is not a DNS-1123 label")
        if kind != "Namespace" and d["metadata"].get("namespace") != "gradsync":
            self.err(d, "namespace is not gradsync")

    def check_workload(self, w):
        spec = w.get("spec", {})
        tmpl_labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
        if w["kind"] != "Job":
            sel = spec.get("selector", {}).get("matchLabels", {})
            if not sel or any(tmpl_labels.get(k) != v for k, v in sel.items()):
                self.err(w, "selector does not match the pod template labels")
            if not isinstance(spec.get("replicas", 1), int):
                self.err(w, "replicas is not an integer")
        elif self.pod_spec(w).get("restartPolicy") not in ("Never", "OnFailure"):
            self.err(w, "a Job's restartPolicy must be Never or OnFailure")
        ports = self.ports_of(w)
        for c in self.pod_spec(w).get("containers", []):
            if not c.get("name") or not c.get("image"):
                self.err(w, "container without name or image")
            if not all(isinstance(a, str) for a in c.get("args", [])):
                self.err(w, "container args must be strings")
            if not all(isinstance(p, int) for p in ports):
                self.err(w, "containerPort is not an integer")
            for probe in ("readinessProbe", "livenessProbe"):
                for how in ("grpc", "tcpSocket"):
                    g = c.get(probe, {}).get(how)
                    if g is not None and g.get("port") not in ports:
                        self.err(w, "%s %s port %r is not a container port"
                                 % (probe, how, g.get("port")))

    def selected(self, svc):
        sel = svc.get("spec", {}).get("selector", {})
        return [w for w in self.of_kind(*WORKLOADS)
                if sel and all(w["spec"]["template"]["metadata"]["labels"].get(k) == v
                               for k, v in sel.items())]

    def check_service(self, s):
        targets = self.selected(s)
        if not targets:
            return self.err(s, "selects no workload")
        for p in s.get("spec", {}).get("ports", []):
            tp = p.get("targetPort", p.get("port"))
            if not isinstance(p.get("port"), int) or \
                    not any(tp in self.ports_of(w) for w in targets):
                self.err(s, "port %r: no selected container declares it" % tp)

    def service_ports(self):
        return {s["metadata"]["name"]: ({p.get("port") for p in s["spec"].get("ports", [])},
                                        s["spec"].get("clusterIP") == "None")
                for s in self.of_kind("Service")}

    def check_addresses(self, w):
        services = self.service_ports()
        for c in self.pod_spec(w).get("containers", []):
            for a in c.get("args", []):
                flag = next((f for f in ADDR_FLAGS if a.startswith(f)), None)
                for addr in (a[len(flag):].split(",") if flag else []):
                    host, _, port = addr.rpartition(":")
                    parts = host.split(".")
                    name = parts[1] if len(parts) == 2 else parts[0]
                    ports, headless = services.get(name, (set(), False))
                    if not port.isdigit() or int(port) not in ports or \
                            (len(parts) == 2 and not headless):
                        self.err(w, "%s: no Service %r serves port %s" % (a, name, port))

    def gradsync_containers(self, w):
        return [c for c in self.pod_spec(w).get("containers", [])
                if c.get("args") and str(c["args"][0]).startswith("gradsync")]

    def check_secret_files(self, w, flags, secret):
        """Every gradsync container's FLAG=DIR/FILE, DIR a read-only mount of `secret`."""
        volumes = {v.get("name"): v.get("secret", {}).get("secretName")
                   for v in self.pod_spec(w).get("volumes", [])}
        for c in self.gradsync_containers(w):
            mounts = {m.get("mountPath"): m for m in c.get("volumeMounts", [])}
            for flag in flags:
                files = [a[len(flag) + 1:] for a in c["args"] if a.startswith(flag + "=")]
                m = mounts.get(files[0].rpartition("/")[0]) if len(files) == 1 else None
                if m is None or volumes.get(m.get("name")) != secret \
                        or not m.get("readOnly"):
                    self.err(w, "container %s: no %s=DIR/FILE with DIR a read-only "
                             "mount of Secret %s" % (c.get("name"), flag, secret))

    def check_token(self, w):
        self.check_secret_files(w, ("--token_file",), "gradsync-token")

    def check_tls(self, w):
        self.check_secret_files(w, ("--tls_cert", "--tls_key", "--tls_ca"), "gradsync-tls")
        for c in self.gradsync_containers(w):
            for probe in ("readinessProbe", "livenessProbe"):
                if "grpc" in c.get(probe, {}):
                    self.err(w, "%s is a gRPC probe, which cannot pass mutual TLS" % probe)

    def check_statefulset(self, st):
        _, headless = self.service_ports().get(st["spec"].get("serviceName"), (0, False))
        if not headless:
            self.err(st, "serviceName is not a headless Service")

    def check_gpu(self):
        for st in self.of_kind("StatefulSet"):
            for c in self.pod_spec(st).get("containers", []):
                if "nvidia.com/gpu" not in c.get("resources", {}).get("limits", {}):
                    self.err(st, "container %s has no nvidia.com/gpu limit" % c["name"])

    def run(self, gpu, tls=False):
        for d in self.docs:
            self.check_object(d)
        for w in self.of_kind(*WORKLOADS):
            self.check_workload(w)
            self.check_addresses(w)
            self.check_token(w)
            if tls:
                self.check_tls(w)
        for s in self.of_kind("Service"):
            self.check_service(s)
        for st in self.of_kind("StatefulSet"):
            self.check_statefulset(st)
        if gpu:
            self.check_gpu()
        return self.errors


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        docs = list(yaml.safe_load_all(f))
    errors = Checker(docs).run(gpu="--gpu" in sys.argv[2:], tls="--tls" in sys.argv[2:])
    for e in errors:
        print("%s: %s" % (sys.argv[1], e))
    print("%s: %d objects, %d problems" % (sys.argv[1], len(docs), len(errors)))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
