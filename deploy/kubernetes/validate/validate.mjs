// Offline validation of Kubernetes manifests, used by tests/packaging.sh.
// Usage: node validate.mjs FILE.yaml...   → one line per object "ok <file> <Kind>/<name>" or
// "error <file> <Kind>/<name>: <reason>"; exit 1 when any error.
//
// Three layers, because a JSON-schema check alone accepts misspelt fields:
//  1. Kubernetes OpenAPI schema (types, required fields, enums, formats) via the ajv validators
//     compiled into the npm package kubernetes-models (apiVersion/kind → model class).
//  2. Unknown fields: every object is type-checked by the TypeScript compiler against the
//     kubernetes-types declarations (excess property check on object literals), like the API
//     server's strict field validation.
//  3. Checks the API server does beyond the schema for workloads: selector matches the template
//     labels, every volumeMount names a declared volume, container names unique, hostPath
//     absolute.
//  4. nri-qos's own rules for its node DaemonSets (nodeChecks; issue #30 §3), so that the
//     Kubernetes install sees what the package install sees:
//     - the relay container (the installer DaemonSet, static or rendered by the chart) and the
//       reconcile container mount kubelet's directory read-only from the node (hostPath type
//       Directory, never created empty) at its name, and are given kubelet's CPU manager
//       checkpoint in it (relay: env NRI_QOS_KUBELET_CPU_STATE, which install.sh passes as
//       --kubelet-cpu-state; reconcile: the flag); they mount /sys/fs/cgroup and /sys/fs/resctrl
//       read-write and /run/systemd read-only from the node; the relay is given the runtime's
//       CRI socket (env NRI_QOS_CRI_SOCKET, install.sh's --cri-socket; "" = no unseen pass) and
//       mounts its directory read-only from the node at its name;
//     - the relay is not privileged and has exactly the capabilities docs/install.md lists
//       (RELAY_CAPABILITIES), everything else dropped, no privilege escalation, hostPID, and
//       the AppArmor and SELinux settings the writes need;
//     - install and policy-sync precompile into the node's cache and last good store: the node's
//       /run/nri-qos, /var/lib/nri-qos and /etc/nri (read-only) at their names, no emptyDir.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import YAML from "yaml";

const require = createRequire(import.meta.url);
const ts = require("typescript");

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node validate.mjs FILE.yaml...");
  process.exit(2);
}

// apiVersion → [kubernetes-models path prefix, kubernetes-types module]
function modulesFor(apiVersion) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  if (group === "") return [`kubernetes-models/${version}`, `kubernetes-types/core/${version}`];
  const short = group.replace(/\.k8s\.io$/, "");
  return [`kubernetes-models/${group}/${version}`, `kubernetes-types/${short}/${version}`];
}

function workloadChecks(obj) {
  const errs = [];
  const spec = obj.spec || {};
  const tmpl = spec.template;
  if (!tmpl) return errs;
  const sel = (spec.selector && spec.selector.matchLabels) || {};
  const labels = (tmpl.metadata && tmpl.metadata.labels) || {};
  for (const [k, v] of Object.entries(sel))
    if (labels[k] !== v) errs.push(`selector ${k}=${v} does not match the template labels`);
  const pod = tmpl.spec || {};
  const vols = new Set((pod.volumes || []).map((v) => v.name));
  const names = new Set();
  for (const c of [...(pod.initContainers || []), ...(pod.containers || [])]) {
    if (names.has(c.name)) errs.push(`duplicate container name ${c.name}`);
    names.add(c.name);
    for (const m of c.volumeMounts || [])
      if (!vols.has(m.name)) errs.push(`container ${c.name}: volumeMount ${m.name} has no volume`);
  }
  for (const v of pod.volumes || [])
    if (v.hostPath && !String(v.hostPath.path).startsWith("/"))
      errs.push(`volume ${v.name}: hostPath ${v.hostPath.path} is not absolute`);
  return errs;
}

// The relay container's capabilities, as docs/install.md ("Kubernetes", the relay's
// capabilities) documents each one. Exactly these: one more or one less is an error.
const RELAY_CAPABILITIES = ["DAC_OVERRIDE", "SYS_RESOURCE"];
const KUBELET_CPU_STATE = "cpu_manager_state";

function nodeChecks(obj) {
  const errs = [];
  if (obj.kind !== "DaemonSet") return errs;
  const pod = (obj.spec && obj.spec.template && obj.spec.template.spec) || {};
  const all = [...(pod.initContainers || []), ...(pod.containers || [])];
  const byName = (n) => all.find((c) => c.name === n);
  const relay = byName("relay"), reconcile = byName("reconcile");
  if (!relay && !reconcile) return errs;
  const vols = new Map((pod.volumes || []).map((v) => [v.name, v]));
  // The mount of `path` in container c, from the node's `path` (hostPath at the same name).
  const hostMount = (c, path, { readOnly, type } = {}) => {
    const m = (c.volumeMounts || []).find((x) => x.mountPath === path);
    if (!m) return errs.push(`container ${c.name}: the node's ${path} is not mounted`), null;
    const v = vols.get(m.name) || {};
    if (!v.hostPath) return errs.push(`container ${c.name}: ${path} is volume ${m.name}, not the node's ${path} (hostPath)`), null;
    if (v.hostPath.path !== path) errs.push(`container ${c.name}: ${path} is the node's ${v.hostPath.path}, not its ${path}`);
    if (type && v.hostPath.type !== type) errs.push(`container ${c.name}: volume ${m.name} (${path}) must be hostPath type ${type}, not ${v.hostPath.type || "unset"}`);
    if (readOnly === true && m.readOnly !== true) errs.push(`container ${c.name}: ${path} must be mounted readOnly`);
    if (readOnly === false && m.readOnly === true) errs.push(`container ${c.name}: ${path} must be mounted read-write`);
    return m;
  };
  const dirOf = (p) => p.replace(/\/[^/]*$/, "") || "/";
  // kubelet's checkpoint: an absolute path named cpu_manager_state in kubelet's directory, which
  // is mounted read-only (also below: recursiveReadOnly where the runtime can) and never created.
  const kubeletState = (c, given, how) => {
    if (given === undefined) return errs.push(`container ${c.name}: kubelet's CPU manager checkpoint is not given (${how})`);
    if (!String(given).startsWith("/") || !String(given).endsWith("/" + KUBELET_CPU_STATE))
      return errs.push(`container ${c.name}: ${how} is ${JSON.stringify(given)}, not <kubelet's directory>/${KUBELET_CPU_STATE}`);
    const m = hostMount(c, dirOf(given), { readOnly: true, type: "Directory" });
    if (m && m.recursiveReadOnly !== "IfPossible" && m.recursiveReadOnly !== "Enabled")
      errs.push(`container ${c.name}: ${dirOf(given)} must be recursiveReadOnly (the pods' volumes below it)`);
  };
  const nodePaths = (c) => {
    hostMount(c, "/sys/fs/cgroup", { readOnly: false });
    hostMount(c, "/sys/fs/resctrl", { readOnly: false });
    hostMount(c, "/run/systemd", { readOnly: true });
  };
  if (relay) {
    const env = new Map((relay.env || []).map((e) => [e.name, e.value]));
    kubeletState(relay, env.get("NRI_QOS_KUBELET_CPU_STATE"), "env NRI_QOS_KUBELET_CPU_STATE, install.sh's --kubelet-cpu-state");
    nodePaths(relay);
    // the runtime's CRI socket for the unseen pass (install.sh: --cri-socket; "" = no pass):
    // its directory from the node, read-only, at its name
    const cri = env.get("NRI_QOS_CRI_SOCKET");
    if (cri === undefined) errs.push("container relay: the runtime's CRI socket is not given (env NRI_QOS_CRI_SOCKET, install.sh's --cri-socket; \"\" for no unseen pass)");
    else if (cri !== "" && !/^\/[^/\s]+(\/[^/\s]+)+$/.test(cri)) errs.push(`container relay: env NRI_QOS_CRI_SOCKET is ${JSON.stringify(cri)}, not an absolute path below a directory`);
    else if (cri !== "") hostMount(relay, dirOf(cri), { readOnly: true });
    hostMount(relay, "/run/nri-qos", { readOnly: false });
    hostMount(relay, "/var/lib/nri-qos", { readOnly: false });
    const sc = relay.securityContext || {};
    if (sc.privileged !== false) errs.push(`container relay: privileged must be false (${sc.privileged === true ? "it is true" : "unset"}): it gets the capabilities it needs`);
    if (sc.allowPrivilegeEscalation !== false) errs.push("container relay: allowPrivilegeEscalation must be false");
    const caps = sc.capabilities || {};
    if (JSON.stringify(caps.drop || []) !== JSON.stringify(["ALL"])) errs.push(`container relay: capabilities.drop must be ["ALL"], not ${JSON.stringify(caps.drop || [])}`);
    const add = [...(caps.add || [])].sort();
    if (JSON.stringify(add) !== JSON.stringify(RELAY_CAPABILITIES))
      errs.push(`container relay: capabilities.add must be exactly ${JSON.stringify(RELAY_CAPABILITIES)} (docs/install.md), not ${JSON.stringify(add)}`);
    // what the capabilities do not cover (docs/install.md): resctrl writes under AppArmor,
    // cgroup and other containers' /proc writes under SELinux
    if (!sc.appArmorProfile || sc.appArmorProfile.type !== "Unconfined") errs.push("container relay: appArmorProfile must be Unconfined (the default profile denies writes under /sys/fs/resctrl)");
    if (!sc.seLinuxOptions || sc.seLinuxOptions.type !== "spc_t") errs.push("container relay: seLinuxOptions.type must be spc_t (container_t writes no cgroup file)");
    if (pod.hostPID !== true) errs.push("hostPID must be true: the relay writes /proc/<pid>/oom_score_adj of containers");
    // install and policy-sync: `nri-qos check --cache-dir` into the node's cache and last good
    // store (install.sh NRI_QOS_CACHE_DIR, NRI_QOS_LAST_GOOD_DIR), the policy at the node's path.
    for (const n of ["install", "policy-sync"]) {
      const c = byName(n);
      if (!c) { errs.push(`no ${n} container`); continue; }
      const cenv = new Map((c.env || []).map((e) => [e.name, e.value]));
      for (const [k, dflt] of [["NRI_QOS_CACHE_DIR", "/run/nri-qos/cache"], ["NRI_QOS_LAST_GOOD_DIR", "/var/lib/nri-qos"], ["NODE_POLICY", "/etc/nri/nri-qos.toml"]])
        if (cenv.has(k) && cenv.get(k) !== dflt) errs.push(`container ${n}: ${k} must be the node's ${dflt} (or unset), not ${JSON.stringify(cenv.get(k))}`);
      hostMount(c, "/run/nri-qos", { readOnly: false });
      hostMount(c, "/var/lib/nri-qos", { readOnly: false });
      hostMount(c, "/etc/nri", { readOnly: true });
    }
  }
  if (reconcile) {
    const text = [...(reconcile.command || []), ...(reconcile.args || [])].join(" ");
    const m = text.match(/--kubelet-cpu-state[ =]("[^"]*"|'[^']*'|\S+)/);
    kubeletState(reconcile, m ? m[1].replace(/^["']|["']$/g, "") : undefined, "reconcile --kubelet-cpu-state");
    nodePaths(reconcile);
  }
  return errs;
}

// The Prometheus Operator's kinds the chart makes (metrics.podMonitor, metrics.prometheusRule):
// no Kubernetes schema here, so the fields nri-qos uses are checked by hand (monitoring.coreos.com/v1,
// prometheus-operator Documentation/api-reference/api.md PodMonitorSpec, PrometheusRuleSpec); the
// rules' expressions are checked by `promtool check rules` in tests/packaging.sh.
const CRDS = {
  "monitoring.coreos.com/v1 PodMonitor": (o) => {
    const e = [], s = o.spec || {};
    if (!s.selector || typeof s.selector !== "object") e.push("PodMonitor: spec.selector missing");
    const eps = s.podMetricsEndpoints;
    if (!Array.isArray(eps) || !eps.length) e.push("PodMonitor: spec.podMetricsEndpoints missing");
    for (const ep of eps || []) {
      for (const k of Object.keys(ep)) if (!["port", "path", "interval", "scrapeTimeout", "relabelings", "metricRelabelings", "scheme"].includes(k)) e.push(`PodMonitor: unknown endpoint field ${k}`);
      if (typeof ep.port !== "string") e.push("PodMonitor: endpoint port must be a port name");
      if (ep.interval !== undefined && !/^([0-9]+(ms|s|m|h))+$/.test(ep.interval)) e.push(`PodMonitor: interval ${ep.interval} is no duration`);
    }
    return e;
  },
  "monitoring.coreos.com/v1 PrometheusRule": (o) => {
    const e = [], g = (o.spec || {}).groups;
    if (!Array.isArray(g) || !g.length) return ["PrometheusRule: spec.groups missing"];
    for (const grp of g) {
      if (typeof grp.name !== "string") e.push("PrometheusRule: a group without a name");
      for (const r of grp.rules || []) {
        if (typeof r.expr !== "string" || !(r.alert || r.record)) e.push(`PrometheusRule: group ${grp.name}: a rule needs expr and alert or record`);
        for (const k of Object.keys(r)) if (!["alert", "record", "expr", "for", "labels", "annotations", "keep_firing_for"].includes(k)) e.push(`PrometheusRule: unknown rule field ${k}`);
      }
    }
    return e;
  },
};

const results = []; // {file, id, errors[]}
const tsSources = []; // [index, source]
for (const file of files) {
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"));
  for (const doc of docs) {
    if (doc.errors.length) {
      results.push({ file, id: "-", errors: doc.errors.map((e) => e.message.split("\n")[0]) });
      continue;
    }
    const obj = doc.toJS();
    if (obj === null || obj === undefined) continue;
    const id = `${obj.kind}/${obj.metadata && obj.metadata.name}`;
    const r = { file, id, errors: [] };
    results.push(r);
    if (typeof obj.apiVersion !== "string" || typeof obj.kind !== "string") {
      r.errors.push("apiVersion/kind missing");
      continue;
    }
    const crd = CRDS[`${obj.apiVersion} ${obj.kind}`];
    if (crd) {
      if (!obj.metadata || typeof obj.metadata.name !== "string") r.errors.push("metadata.name missing");
      r.errors.push(...crd(obj));
      continue;
    }
    const [modelPrefix, typesModule] = modulesFor(obj.apiVersion);
    try {
      const mod = await import(`${modelPrefix}/${obj.kind}`);
      const Model = mod[obj.kind] || mod.default;
      new Model(obj).validate();
    } catch (e) {
      r.errors.push(
        e.code === "ERR_MODULE_NOT_FOUND" || e.code === "ERR_PACKAGE_PATH_NOT_EXPORTED"
          ? `unknown apiVersion/kind ${obj.apiVersion} ${obj.kind}`
          : `schema: ${String(e.message).split("\n").join("; ")}`
      );
      continue;
    }
    r.errors.push(...workloadChecks(obj));
    r.errors.push(...nodeChecks(obj));
    tsSources.push([results.length - 1,
      `import type { ${obj.kind} } from "${typesModule}";\n` +
      `export const o: ${obj.kind} = ${JSON.stringify(obj, null, 1)};\n`]);
  }
}

// Layer 2: one TypeScript program, one file per object.
if (tsSources.length) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nri-qos-k8s-"));
  const byFile = new Map();
  const roots = tsSources.map(([idx, src], i) => {
    const f = path.join(dir, `o${i}.ts`);
    fs.writeFileSync(f, src);
    byFile.set(f, idx);
    return f;
  });
  const here = path.dirname(new URL(import.meta.url).pathname);
  const program = ts.createProgram(roots, {
    noEmit: true, strict: true, skipLibCheck: true, types: [],
    moduleResolution: ts.ModuleResolutionKind.Node10, module: ts.ModuleKind.ESNext,
    baseUrl: here, typeRoots: [], paths: { "*": [path.join(here, "node_modules/*")] },
  });
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const idx = d.file ? byFile.get(d.file.fileName) : undefined;
    const msg = ts.flattenDiagnosticMessageText(d.messageText, "; ");
    if (idx === undefined) results.push({ file: "-", id: "typescript", errors: [msg] });
    else results[idx].errors.push(`field check: ${msg}`);
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

let bad = 0;
for (const r of results) {
  if (r.errors.length) {
    bad++;
    for (const e of r.errors) console.log(`error ${r.file} ${r.id}: ${e}`);
  } else console.log(`ok ${r.file} ${r.id}`);
}
process.exit(bad ? 1 : 0);
