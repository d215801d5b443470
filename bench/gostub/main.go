// gostub: the Go peer of nri-qos's native mode for `make bench` (bench/native.sh,
// bench/podstart.sh). A native NRI plugin on containerd/nri pkg/stub (Debian
// golang-github-containerd-nri-dev 0.6.1) that does, in Go, the work of the benchmark's own policy
// (bench/native-policy.toml, which nri-qos reads in the same runs) on a mainline kernel with
// cgroup v1 (or v2):
//
//   - classify the pod on every event from its labels/annotations, with that policy's rules in
//     the same order (kube-system namespace, Koordinator, openFuyao, Katalyst, rubik/Volcano,
//     clearcfs, then the Kubernetes QoS class read from the cgroup parent) and its two gates
//     (HLS, LS-unthrottled: namespace kube-system only, else LS);
//   - RunPodSandbox: pod cgroup knobs (unthrottled: CFS quota -1; nothing for BE);
//   - CreateContainer: the adjustment (BE: cpu.shares 2; unthrottled: CFS quota -1);
//   - StartContainer: container cgroup knobs (BE: cpu.cfs_burst_us 0 and oom_score_adj 1000 in
//     /proc/<pid>, which NRI 0.6 cannot carry in an adjustment; LS/HLS: CFS burst = quota).
//
// Keep it and bench/native-policy.toml in step: the "Same work, checked" tables of
// bench/nridriver and bench/podstart.py compare what the two peers wrote.
//
// What it does NOT do that nri-qos does (see BENCHMARKS.md, "same work"): read a policy file
// (its rules are compiled in), evaluate in a separate sandboxed process, keep a per-pod memo,
// leave a record per event.
//
// Plugin config (the same JSON nri-qos reads): cgroup_root (default /sys/fs/cgroup),
// cgroup_layout (v1|v2, default: v1 when <root>/cpu/cpu.shares exists), proc_root (default
// /proc); "mode": "null" answers every event with nothing (the protocol floor).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

type config struct {
	CgroupRoot   string `json:"cgroup_root"`
	CgroupLayout string `json:"cgroup_layout"`
	ProcRoot     string `json:"proc_root"`
	Mode         string `json:"mode"`
}

type plugin struct{ cfg config }

// rule: first match wins. where: l = pod label, a = pod or container annotation, b = both.
type rule struct{ where, key, value, class string }

var rules = []rule{
	{"l", "koordinator.sh/qosClass", "LSE", "HLS"}, {"l", "koordinator.sh/qosClass", "LSR", "HLS"},
	{"l", "koordinator.sh/qosClass", "LS", "LS"}, {"l", "koordinator.sh/qosClass", "BE", "BE"},
	{"l", "koordinator.sh/qosClass", "SYSTEM", "SYSTEM"},
	{"b", "openfuyao.com/qos-level", "HLS", "HLS"}, {"b", "openfuyao.com/QoS-level", "HLS", "HLS"},
	{"b", "openfuyao.com/qos-level", "LS", "LS"}, {"b", "openfuyao.com/QoS-level", "LS", "LS"},
	{"b", "openfuyao.com/qos-level", "BE", "BE"}, {"b", "openfuyao.com/QoS-level", "BE", "BE"},
	{"a", "katalyst.kubewharf.io/qos_level", "dedicated_cores", "HLS"},
	{"a", "katalyst.kubewharf.io/qos_level", "shared_cores", "LS"},
	{"a", "katalyst.kubewharf.io/qos_level", "reclaimed_cores", "BE"},
	{"a", "katalyst.kubewharf.io/qos_level", "system_cores", "SYSTEM"},
	{"b", "volcano.sh/preemptable", "true", "BE"},
	{"a", "qos.class", "ls", "LS-unthrottled"},
}

func classify(pod *api.PodSandbox, ctr *api.Container) string {
	if pod.Namespace == "kube-system" {
		return "SYSTEM"
	}
	ann := func(k string) (string, bool) {
		if v, ok := pod.Annotations[k]; ok {
			return v, true
		}
		if ctr != nil {
			v, ok := ctr.Annotations[k]
			return v, ok
		}
		return "", false
	}
	class := ""
	for _, r := range rules {
		v, ok := "", false
		if r.where != "a" {
			v, ok = pod.Labels[r.key]
		}
		if !ok && r.where != "l" {
			v, ok = ann(r.key)
		}
		if ok && v == r.value {
			class = r.class
			break
		}
	}
	if class == "" { // Kubernetes QoS class from the cgroup parent (kubelet's cgroupfs naming)
		switch cp := pod.GetLinux().GetCgroupParent(); {
		case strings.Contains(cp, "besteffort"):
			class = "BE"
		default:
			class = "LS"
		}
	}
	// the gates of bench/native-policy.toml: gate.namespaces = ["kube-system"], fallback LS
	if (class == "HLS" || class == "LS-unthrottled") && pod.Namespace != "kube-system" {
		class = "LS"
	}
	return class
}

// write a knob by its v1 name into cgroup directory rel (v2: the cgroup2 file).
func (p *plugin) write(ctrl, rel, knob, value string) {
	path := filepath.Join(p.cfg.CgroupRoot, ctrl, rel, knob)
	if p.cfg.CgroupLayout == "v2" {
		v2 := map[string]string{"cpu.cfs_burst_us": "cpu.max.burst", "cpu.cfs_quota_us": "cpu.max"}[knob]
		if value == "-1" && v2 == "cpu.max" {
			value = "max"
		}
		path = filepath.Join(p.cfg.CgroupRoot, rel, v2)
	}
	writeFile(path, value)
}

// writeFile writes an existing kernel file (no create, as in cgroupfs and procfs).
func writeFile(path, value string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		_, err = f.WriteString(value)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gostub: %v\n", err)
	}
}

func (p *plugin) Configure(_ context.Context, cfg, _, _ string) (stub.EventMask, error) {
	if cfg != "" {
		if err := json.Unmarshal([]byte(cfg), &p.cfg); err != nil {
			fmt.Fprintf(os.Stderr, "gostub: config: %v\n", err)
		}
	}
	if p.cfg.CgroupRoot == "" {
		p.cfg.CgroupRoot = "/sys/fs/cgroup"
	}
	if p.cfg.ProcRoot == "" {
		p.cfg.ProcRoot = "/proc"
	}
	if p.cfg.CgroupLayout == "" || p.cfg.CgroupLayout == "auto" || p.cfg.CgroupLayout == "hybrid" {
		p.cfg.CgroupLayout = "v2"
		if _, err := os.Stat(filepath.Join(p.cfg.CgroupRoot, "cpu", "cpu.shares")); err == nil {
			p.cfg.CgroupLayout = "v1"
		}
	}
	// the events nri-qos subscribes to (relay mask 0xaf)
	return api.MustParseEventMask("RunPodSandbox", "StopPodSandbox", "RemovePodSandbox",
		"CreateContainer", "StartContainer", "UpdateContainer"), nil
}

func (p *plugin) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	if p.cfg.Mode == "null" {
		return nil
	}
	if classify(pod, nil) == "LS-unthrottled" {
		p.write("cpu", pod.GetLinux().GetCgroupParent(), "cpu.cfs_quota_us", "-1")
	}
	return nil
}

func (p *plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	if p.cfg.Mode == "null" {
		return nil, nil, nil
	}
	adj := &api.ContainerAdjustment{}
	switch classify(pod, ctr) {
	case "BE":
		adj.SetLinuxCPUShares(2)
	case "LS-unthrottled":
		adj.SetLinuxCPUQuota(-1)
	default:
		return nil, nil, nil
	}
	return adj, nil, nil
}

func (p *plugin) StartContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	if p.cfg.Mode == "null" {
		return nil
	}
	cg := ctr.GetLinux().GetCgroupsPath()
	switch classify(pod, ctr) {
	case "BE":
		p.write("cpu", cg, "cpu.cfs_burst_us", "0")
		if ctr.Pid != 0 {
			path := filepath.Join(p.cfg.ProcRoot, strconv.Itoa(int(ctr.Pid)), "oom_score_adj")
			writeFile(path, "1000")
		}
	case "LS", "HLS":
		if q := ctr.GetLinux().GetResources().GetCpu().GetQuota().GetValue(); q > 0 {
			p.write("cpu", cg, "cpu.cfs_burst_us", strconv.FormatInt(q, 10))
		}
	}
	return nil
}

func (p *plugin) UpdateContainer(context.Context, *api.PodSandbox, *api.Container, *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	return nil, nil
}
func (p *plugin) StopPodSandbox(context.Context, *api.PodSandbox) error   { return nil }
func (p *plugin) RemovePodSandbox(context.Context, *api.PodSandbox) error { return nil }

func main() {
	s, err := stub.New(&plugin{})
	if err == nil {
		err = s.Run(context.Background())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gostub: %v\n", err)
		os.Exit(1)
	}
}
