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
