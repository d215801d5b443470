// nridriver: the runtime side of the native-mode benchmark (bench/native.sh). It plays containerd
// with containerd/nri's own runtime library, pkg/adaptation (Debian
// golang-github-containerd-nri-dev 0.6.1, the NRI of containerd 1.7): one adaptation.Adaptation
// per peer, each launching its plugin the way containerd does (executable `NN-name` in a plugin
// directory, fd 3 = one end of a socketpair, environment NRI_PLUGIN_{NAME,IDX,SOCKET} only,
// plugin config from the drop-in directory), then RunPodSandbox, CreateContainer and
// StartContainer of a realistic pod, peers interleaved event by event, in a new random order
// (fixed seed) for each event of each round: no peer always goes first, and no peer always
// follows the same one (what a peer leaves running after its reply, its children exiting, its
// next spare being made, lands on whoever comes next; a fixed rotation would always charge it to
// the same neighbour).
//
// Measured per peer and event: wall time of the adaptation call (request → reply, p50/p90/p99);
// CPU of the plugin's whole process tree (see cpuMeter); RSS of that tree. Nothing is asserted
// about time; wrong replies (a peer that stopped adjusting) are reported as errors.
//
// Usage: nridriver -fixtures DIR -scratch DIR -policy FILE [-rounds N] [-warmup N]
//
//	-peer NAME=BINARY[,key=value...] ... [-ref NAME] [-label k=v]... [-json FILE]
//
// Every peer gets the same plugin config (JSON; the keys nri-qos reads): policy, cgroup_root,
// cgroup_layout v1, proc_root, state_dir, cache_dir under its own scratch directory, plus the
// peer's key=value extras; extras whose key starts with "_" are the driver's own, not passed on:
// `_work=none` marks a peer that is not meant to do the work (a floor; like a Go peer with
// mode=null, it is left out of the "same work" check). Markdown tables go to stdout, diagnostics
// to stderr.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	nri "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
)

// ---- flags -------------------------------------------------------------------------------------

type multi []string

func (m *multi) String() string     { return strings.Join(*m, " ") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

var (
	fixtures   = flag.String("fixtures", "", "directory with sandbox-create.json and container-create.json (NRI v0.1 requests)")
	scratch    = flag.String("scratch", "", "scratch directory (per-peer cgroup/proc roots, plugin dirs)")
	policy     = flag.String("policy", "", "policy file given to every peer's config")
	rounds     = flag.Int("rounds", 1000, "measured pods per peer")
	warmup     = flag.Int("warmup", 20, "unmeasured pods per peer first")
	refName    = flag.String("ref", "go-stub", "peer the ratios are computed against")
	runtimeVer = flag.String("runtime-version", "1.7.24~ds1", "runtime version sent in Configure")
	nriVer     = flag.String("nri-version", "?", "version of the containerd/nri library built in (for the report)")
	jsonOut    = flag.String("json", "", "write raw results here")
	verbose    = flag.Bool("v", false, "print where the driver's own time goes")
	stormN     = flag.Int("storm", 0, "pod storm (storm.go): this many pods at once instead of the rounds")
	inflight   = flag.Int("inflight", 16, "storm: requests in flight at most")
	stormRuns  = flag.Int("storm-runs", 3, "storm: runs per peer (interleaved)")
	peersFlag  multi
	labelsFlag multi
)

// workDiffers: a peer's adjustment or writes differ from the reference peer's (not the same work).
var workDiffers bool

// ---- quiet NRI logger: warnings and errors to stderr, and remember "closing plugin" ------------

type logger struct{ closed []string }

func (l *logger) Debugf(context.Context, string, ...interface{}) {}
func (l *logger) Infof(context.Context, string, ...interface{})  {}
func (l *logger) Warnf(_ context.Context, f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "nri warning: "+f+"\n", a...)
}
func (l *logger) Errorf(_ context.Context, f string, a ...interface{}) {
	msg := fmt.Sprintf(f, a...)
	l.closed = append(l.closed, msg)
	fmt.Fprintln(os.Stderr, "nri error: "+msg)
}

var nlog = &logger{}

// ---- CPU of a process tree ----------------------------------------------------------------------

// cpuMeter: the plugin runs in a cgroup of its own from its first instruction (the plugin file
// containerd would exec is a two-line wrapper that writes its pid into the cgroup and execs the
// real binary), so everything it forks is counted, alive or reaped, spare processes included:
// cgroup v1 cpuacct.usage (ns) when the cpuacct controller is mounted, else cgroup v2 cpu.stat
// usage_usec.
type cpuMeter struct {
	dir string // cgroup directory
	v2  bool
}

func newCPUMeter(name string) (*cpuMeter, error) {
	base := fmt.Sprintf("nri-qos-bench-%d-%s", os.Getpid(), name)
	if st, err := os.Stat("/sys/fs/cgroup/cpuacct/cpuacct.usage"); err == nil && st.Mode().IsRegular() {
		d := filepath.Join("/sys/fs/cgroup/cpuacct", base)
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
		return &cpuMeter{dir: d}, nil
	}
	for _, root := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err != nil {
			continue
		}
		d := filepath.Join(root, base)
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
		return &cpuMeter{dir: d, v2: true}, nil
	}
	return nil, fmt.Errorf("no cpuacct controller and no cgroup2 mount")
}

func (m *cpuMeter) procsFile() string { return filepath.Join(m.dir, "cgroup.procs") }

// usage in µs (float, ns resolution on v1)
func (m *cpuMeter) usage() float64 {
	if !m.v2 {
		b, _ := os.ReadFile(filepath.Join(m.dir, "cpuacct.usage"))
		n, _ := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		return n / 1000
	}
	b, _ := os.ReadFile(filepath.Join(m.dir, "cpu.stat"))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "usage_usec" {
			n, _ := strconv.ParseFloat(f[1], 64)
			return n
		}
	}
	return 0
}

func (m *cpuMeter) pids() []int {
	b, _ := os.ReadFile(m.procsFile())
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func (m *cpuMeter) method() string {
	if m.v2 {
		return "cgroup v2 cpu.stat usage_usec of the plugin's own cgroup"
	}
	return "cgroup v1 cpuacct.usage of the plugin's own cgroup"
}

// remove the cgroup once its processes are gone (plugins exit when the adaptation stops)
func (m *cpuMeter) remove() {
	for i := 0; i < 50; i++ {
		if os.Remove(m.dir) == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "nridriver: could not remove %s (processes left: %v)\n", m.dir, m.pids())
}

// procStatus returns VmRSS and VmHWM (KiB) of pid.
func procStatus(pid int) (rss, hwm int) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		l := s.Text()
		var v int
		if strings.HasPrefix(l, "VmRSS:") {
			fmt.Sscanf(strings.TrimPrefix(l, "VmRSS:"), "%d", &v)
			rss = v
		} else if strings.HasPrefix(l, "VmHWM:") {
			fmt.Sscanf(strings.TrimPrefix(l, "VmHWM:"), "%d", &v)
			hwm = v
		}
	}
	return
}

// procCPU: utime+stime+cutime+cstime of pid in µs (clock ticks of 1/100 s): the cross-check.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	t := 0.0
	for _, i := range []int{11, 12, 13, 14} { // fields 14-17 of proc(5), after pid and comm
		n, _ := strconv.ParseFloat(f[i], 64)
		t += n
	}
	return t * 1e6 / 100
}

// ---- request content ----------------------------------------------------------------------------

// v01 is the part of a captured NRI v0.1 request (tests/fixtures/requests) used as content.
type v01 struct {
	ID   string `json:"id"`
	Pid  int    `json:"pid"`
	Spec struct {
		Resources struct {
			Devices []struct {
				Allow  bool   `json:"allow"`
				Access string `json:"access"`
			} `json:"devices"`
			Memory struct {
				Limit *int64 `json:"limit"`
				Swap  *int64 `json:"swap"`
			} `json:"memory"`
			CPU struct {
				Shares *uint64 `json:"shares"`
				Quota  *int64  `json:"quota"`
				Period *uint64 `json:"period"`
			} `json:"cpu"`
		} `json:"resources"`
		Namespaces  map[string]string `json:"namespaces"`
		CgroupsPath string            `json:"cgroupsPath"`
		Annotations map[string]string `json:"annotations"`
	} `json:"spec"`
	Labels map[string]string `json:"labels"`
}

func loadV01(path string) *v01 {
	b, err := os.ReadFile(path)
	if err != nil {
		fatal("%v", err)
	}
	var r v01
	if err := json.Unmarshal(b, &r); err != nil {
		fatal("%s: %v", path, err)
	}
	return &r
}

func (r *v01) resources() *api.LinuxResources {
	res := &api.LinuxResources{Memory: &api.LinuxMemory{}, Cpu: &api.LinuxCPU{}}
	rs := r.Spec.Resources
	if rs.Memory.Limit != nil {
		res.Memory.Limit = api.Int64(*rs.Memory.Limit)
	}
	if rs.Memory.Swap != nil {
		res.Memory.Swap = api.Int64(*rs.Memory.Swap)
	}
	if rs.CPU.Shares != nil {
		res.Cpu.Shares = api.UInt64(*rs.CPU.Shares)
	}
	if rs.CPU.Quota != nil {
		res.Cpu.Quota = api.Int64(*rs.CPU.Quota)
	}
	if rs.CPU.Period != nil {
		res.Cpu.Period = api.UInt64(*rs.CPU.Period)
	}
	for _, d := range rs.Devices {
		res.Devices = append(res.Devices, &api.LinuxDeviceCgroup{Allow: d.Allow, Access: d.Access})
	}
	return res
}

func (r *v01) namespaces() []*api.LinuxNamespace {
	var out []*api.LinuxNamespace
	keys := make([]string, 0, len(r.Spec.Namespaces))
	for k := range r.Spec.Namespaces {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, &api.LinuxNamespace{Type: k, Path: r.Spec.Namespaces[k]})
	}
	return out
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// What the v0.1 capture lacks but containerd sends in every NRI Container: the args, the
// environment and the mounts of a typical Kubernetes container (a Deployment's pod with a
// service account token and a ConfigMap volume), so the wire size is that of a real request.
var (
	ctrArgs = []string{"sleep", "1000000"}
	ctrEnv  = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=cgfs-pod",
		"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443",
		"KUBERNETES_SERVICE_PORT_HTTPS=443", "KUBERNETES_PORT=tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_PROTO=tcp",
		"KUBERNETES_PORT_443_TCP_PORT=443", "KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1",
	}
)

func ctrMounts(podUID, ctrID string) []*api.Mount {
	kl := "/var/lib/kubelet/pods/" + podUID
	m := func(dst, typ, src string, opts ...string) *api.Mount {
		return &api.Mount{Destination: dst, Type: typ, Source: src, Options: opts}
	}
	return []*api.Mount{
		m("/proc", "proc", "proc", "nosuid", "noexec", "nodev"),
		m("/dev", "tmpfs", "tmpfs", "nosuid", "strictatime", "mode=755", "size=65536k"),
		m("/dev/pts", "devpts", "devpts", "nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"),
		m("/dev/mqueue", "mqueue", "mqueue", "nosuid", "noexec", "nodev"),
		m("/sys", "sysfs", "sysfs", "nosuid", "noexec", "nodev", "ro"),
		m("/sys/fs/cgroup", "cgroup", "cgroup", "nosuid", "noexec", "nodev", "relatime", "ro"),
		m("/etc/config", "bind", kl+"/volumes/kubernetes.io~configmap/config", "rbind", "rprivate", "ro"),
		m("/etc/hosts", "bind", kl+"/etc-hosts", "rbind", "rprivate", "rw"),
		m("/dev/termination-log", "bind", kl+"/containers/c/"+ctrID[:8], "rbind", "rprivate", "rw"),
		m("/etc/hostname", "bind", "/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/"+ctrID+"/hostname", "rbind", "rprivate", "rw"),
		m("/etc/resolv.conf", "bind", "/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/"+ctrID+"/resolv.conf", "rbind", "rprivate", "rw"),
		m("/dev/shm", "bind", "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/"+ctrID+"/shm", "rbind", "rprivate", "rw"),
		m("/var/run/secrets/kubernetes.io/serviceaccount", "bind", kl+"/volumes/kubernetes.io~projected/kube-api-access-x7q2k", "rbind", "rprivate", "ro"),
	}
}

// ---- peers ---------------------------------------------------------------------------------------

type peer struct {
	name, bin string
	extra     map[string]string
	dir       string // scratch/<name>
	file      string // NN-name: the plugin's file name, as NRI names it
	cg, proc  string // scratch cgroup v1 root and proc root of this peer
	r         *nri.Adaptation
	cpu       *cpuMeter
	pid       int // the plugin process containerd would see
	lat       map[string][]float64
	cpuUs     map[string][]float64
	errs      map[string]int
	adjust    string // first CreateContainer adjustment (JSON)
	badAdjust int
	rssMax    int // max over samples of the tree's VmRSS sum (KiB)
	rssEnd    int
	hwm       int // VmHWM of the plugin process at the end
	nprocEnd  int
	cpuTotal  float64 // cgroup usage over the measured rounds (µs)
	lastU     float64 // CPU counter at the start of the peer's last event
	lastEv    string  // that event ("" before the first)
	lastMeas  bool    // whether it is measured
	procTotal float64 // /proc cross-check over the same span (µs)
	work      map[string]string
}

var events = []string{"RunPodSandbox", "CreateContainer", "StartContainer"}

func parsePeer(s string) *peer {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" || rest == "" {
		fatal("bad -peer %q (NAME=BINARY[,k=v...])", s)
	}
	parts := strings.Split(rest, ",")
	p := &peer{name: name, bin: parts[0], extra: map[string]string{},
		lat: map[string][]float64{}, cpuUs: map[string][]float64{}, errs: map[string]int{}, work: map[string]string{}}
	for _, kv := range parts[1:] {
		k, v, _ := strings.Cut(kv, "=")
		p.extra[k] = v
	}
	return p
}

// The knob files of a mainline kernel's cgroup v1 directories (no openEuler qos_level files)
// with their initial values (cpu.cfs_burst_us starts non-zero so that writing 0 shows).
var cgFiles = map[string][][2]string{
	"cpu": {{"cpu.shares", "1024"}, {"cpu.cfs_quota_us", "-1"}, {"cpu.cfs_period_us", "100000"},
		{"cpu.cfs_burst_us", "1000"}, {"cpu.idle", "0"}},
	"memory": {{"memory.limit_in_bytes", "9223372036854771712"}, {"memory.soft_limit_in_bytes", "9223372036854771712"}},
	"cpuset": {{"cpuset.cpus", "0-1"}, {"cpuset.mems", "0"}},
	"pids":   {{"pids.max", "max"}},
	"blkio":  {{"blkio.weight", "500"}},
}

// mkCgroup creates what runc would have created before NRI sees the event: the directories of
// rel under every v1 controller, with their knob files.
func (p *peer) mkCgroup(rel string) {
	for ctrl, files := range cgFiles {
		d := filepath.Join(p.cg, ctrl, rel)
		must(os.MkdirAll(d, 0o755))
		for _, f := range files {
			must(os.WriteFile(filepath.Join(d, f[0]), []byte(f[1]+"\n"), 0o644))
		}
	}
}

func (p *peer) start(idx int) {
	p.dir = filepath.Join(*scratch, p.name)
	p.cg, p.proc = filepath.Join(p.dir, "cg"), filepath.Join(p.dir, "proc")
	pdir, cdir := filepath.Join(p.dir, "plugins"), filepath.Join(p.dir, "conf")
	for _, d := range []string{p.cg, p.proc, pdir, cdir, filepath.Join(p.dir, "state")} {
		must(os.MkdirAll(d, 0o755))
	}
	cfg := map[string]interface{}{
		"policy": *policy, "cgroup_root": p.cg, "cgroup_layout": "v1", "proc_root": p.proc,
		"state_dir": filepath.Join(p.dir, "state"), "cache_dir": filepath.Join(p.dir, "cache"),
	}
	for k, v := range p.extra {
		if !strings.HasPrefix(k, "_") {
			cfg[k] = v
		}
	}
	base := strings.ReplaceAll(p.name, "_", "-")
	file := fmt.Sprintf("%02d-%s", 10+idx, base)
	p.file = file
	cb, _ := json.Marshal(cfg)
	must(os.WriteFile(filepath.Join(cdir, file+".conf"), cb, 0o644))
	var err error
	if p.cpu, err = newCPUMeter(base); err != nil {
		fatal("cpu accounting for %s: %v", p.name, err)
	}
	started = append(started, p)
	bin, _ := filepath.Abs(p.bin)
	sq := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	wrapper := fmt.Sprintf("#!/bin/sh\necho $$ > %s\nexec %s\n", sq(p.cpu.procsFile()), sq(bin))
	must(os.WriteFile(filepath.Join(pdir, file), []byte(wrapper), 0o755))

	nop := func(context.Context, nri.SyncCB) error { return nil }
	upd := func(context.Context, []*nri.ContainerUpdate) ([]*nri.ContainerUpdate, error) { return nil, nil }
	p.r, err = nri.New("containerd", *runtimeVer, nop, upd, nri.WithPluginPath(pdir),
		nri.WithPluginConfigPath(cdir), nri.WithSocketPath(filepath.Join(p.dir, "nri.sock")),
		nri.WithDisabledExternalConnections())
	if err != nil {
		fatal("%s: %v", p.name, err)
	}
	if err := p.r.Start(); err != nil {
		fatal("%s: start: %v", p.name, err)
	}
	pids := p.cpu.pids()
	if len(pids) == 0 {
		fatal("%s: the plugin is not in its cgroup %s", p.name, p.cpu.dir)
	}
	p.pid = pids[0]
	for _, q := range pids { // the process the runtime launched is our child
		if ppid(q) == os.Getpid() {
			p.pid = q
		}
	}
}

// ppid of pid from /proc/PID/stat (0 if gone).
func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	n, _ := strconv.Atoi(f[1])
	return n
}

// charge closes the CPU window of the peer's previous event (see main) and opens one for ev.
func (p *peer) charge(ev string, measured bool) {
	u := p.cpu.usage()
	if p.lastEv != "" && p.lastMeas {
		p.cpuUs[p.lastEv] = append(p.cpuUs[p.lastEv], u-p.lastU)
	}
	p.lastU, p.lastEv, p.lastMeas = u, ev, measured
}

// treeRSS is the VmRSS sum (KiB) and the number of the processes in the peer's cgroup now.
func (p *peer) treeRSS() (sum, n int) {
	for _, q := range p.cpu.pids() {
		r, _ := procStatus(q)
		sum += r
		n++
	}
	return sum, n
}

func (p *peer) sampleRSS() {
	sum, n := p.treeRSS()
	if sum > p.rssMax {
		p.rssMax = sum
	}
	p.rssEnd, p.nprocEnd = sum, n
}

// pod is one pod of one peer in one round.
type pod struct {
	sb  *api.PodSandbox
	ctr *api.Container
}

func (p *peer) newPod(idx, round int, sbx, ctx *v01, labels map[string]string) *pod {
	hex := func(seed string) string { // 64 hex digits, unique per peer and round
		return fmt.Sprintf("%s%04x%012x", seed[:48], idx, round)
	}
	sbID, ctrID := hex(sbx.ID), hex(ctx.ID)
	uid := fmt.Sprintf("0e2e0000-%04x-4000-8000-%012x", idx, round)
	parent := "/kubepods/burstable/pod" + uid
	a := sbx.Spec.Annotations
	sb := &api.PodSandbox{
		Id: sbID, Name: a["io.kubernetes.cri.sandbox-name"], Uid: uid,
		Namespace: a["io.kubernetes.cri.sandbox-namespace"], Labels: copyMap(sbx.Labels),
		Annotations: copyMap(a), RuntimeHandler: "runc",
		Linux: &api.LinuxPodSandbox{CgroupParent: parent, CgroupsPath: parent + "/" + sbID,
			Namespaces: sbx.namespaces(), Resources: sbx.resources()},
		Pid: uint32(200000 + round),
	}
	delete(sb.Labels, "io.cri-containerd.kind") // added by the v0.1 adapter, not a pod label
	for k, v := range labels {
		sb.Labels[k] = v
	}
	sb.Annotations["io.kubernetes.cri.sandbox-id"] = sbID
	sb.Annotations["io.kubernetes.cri.sandbox-uid"] = uid
	ca := copyMap(ctx.Spec.Annotations)
	ca["io.kubernetes.cri.sandbox-id"], ca["io.kubernetes.cri.sandbox-uid"] = sbID, uid
	ctr := &api.Container{
		Id: ctrID, PodSandboxId: sbID, Name: ca["io.kubernetes.cri.container-name"],
		State: api.ContainerState_CONTAINER_CREATED, Labels: copyMap(sb.Labels), Annotations: ca,
		Args: ctrArgs, Env: ctrEnv, Mounts: ctrMounts(uid, ctrID),
		Linux: &api.LinuxContainer{Namespaces: ctx.namespaces(), Resources: ctx.resources(),
			OomScoreAdj: api.Int(0), CgroupsPath: parent + "/" + ctrID},
	}
	p.mkCgroup(parent)
	p.mkCgroup(sb.Linux.CgroupsPath)
	p.mkCgroup(ctr.Linux.CgroupsPath)
	must(os.MkdirAll(filepath.Join(p.proc, strconv.Itoa(int(300000+round))), 0o755))
	must(os.WriteFile(filepath.Join(p.proc, strconv.Itoa(int(300000+round)), "oom_score_adj"), []byte("0\n"), 0o644))
	return &pod{sb: sb, ctr: ctr}
}

// event sends one event; returns the wall time in µs.
func (p *peer) event(ev string, pd *pod, round int) float64 {
	ctx := context.Background()
	var err error
	t0 := time.Now()
	switch ev {
	case "RunPodSandbox":
		err = p.r.RunPodSandbox(ctx, &api.StateChangeEvent{Pod: pd.sb})
	case "CreateContainer":
		var rpl *api.CreateContainerResponse
		rpl, err = p.r.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pd.sb, Container: pd.ctr})
		dt := float64(time.Since(t0).Nanoseconds()) / 1000
		if err == nil {
			s := "{}"
			if rpl != nil && rpl.Adjust != nil {
				b, _ := json.Marshal(rpl.Adjust)
				s = string(b)
			}
			if p.adjust == "" {
				p.adjust = s
			} else if s != p.adjust {
				p.badAdjust++
			}
		} else {
			p.errs[ev]++
		}
		return dt
	case "StartContainer":
		pd.ctr.State = api.ContainerState_CONTAINER_RUNNING
		pd.ctr.Pid = uint32(300000 + round)
		err = p.r.StartContainer(ctx, &api.StateChangeEvent{Pod: pd.sb, Container: pd.ctr})
	case "teardown":
		pd.ctr.State = api.ContainerState_CONTAINER_STOPPED
		_, err = p.r.StopContainer(ctx, &api.StopContainerRequest{Pod: pd.sb, Container: pd.ctr})
		if err == nil {
			err = p.r.RemoveContainer(ctx, &api.StateChangeEvent{Pod: pd.sb, Container: pd.ctr})
		}
		if err == nil {
			err = p.r.StopPodSandbox(ctx, &api.StateChangeEvent{Pod: pd.sb})
		}
		if err == nil {
			err = p.r.RemovePodSandbox(ctx, &api.StateChangeEvent{Pod: pd.sb})
		}
	}
	dt := float64(time.Since(t0).Nanoseconds()) / 1000
	if err != nil {
		p.errs[ev]++
		if p.errs[ev] <= 3 {
			fmt.Fprintf(os.Stderr, "nridriver: %s %s: %v\n", p.name, ev, err)
		}
	}
	return dt
}

// checkWork reads back what the peer wrote for pod pd (after StartContainer): the knob files of
// the pod's, the sandbox's and the container's cgroup that no longer hold the value mkCgroup
// gave them ("none" when nothing changed), and the container process's oom_score_adj.
func (p *peer) checkWork(pd *pod) {
	rd := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(b))
	}
	changed := func(rel string) string {
		var c []string
		for ctrl, files := range cgFiles {
			for _, f := range files {
				if v := rd(filepath.Join(p.cg, ctrl, rel, f[0])); v != f[1] {
					c = append(c, f[0]+"="+v)
				}
			}
		}
		sort.Strings(c)
		if len(c) == 0 {
			return "none"
		}
		return strings.Join(c, " ")
	}
	p.work["pod cgroup"] = changed(pd.sb.Linux.CgroupParent)
	p.work["sandbox cgroup"] = changed(pd.sb.Linux.CgroupsPath)
	p.work["container cgroup"] = changed(pd.ctr.Linux.CgroupsPath)
	p.work["/proc/<pid>/oom_score_adj"] = rd(filepath.Join(p.proc, strconv.Itoa(int(pd.ctr.Pid)), "oom_score_adj"))
}

func (p *peer) cleanPod(pd *pod, round int) {
	for ctrl := range cgFiles {
		os.RemoveAll(filepath.Join(p.cg, ctrl, pd.sb.Linux.CgroupParent))
	}
	os.RemoveAll(filepath.Join(p.proc, strconv.Itoa(300000+round)))
}

// ---- statistics -----------------------------------------------------------------------------------

func pct(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t / float64(len(v))
}

func ratio(a, b float64) string {
	if b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// ---- main ------------------------------------------------------------------------------------------

func main() {
	flag.Var(&peersFlag, "peer", "NAME=BINARY[,key=value...] (repeatable)")
	flag.Var(&labelsFlag, "label", "extra pod label k=v (repeatable; default koordinator.sh/qosClass=BE)")
	flag.Parse()
	if *fixtures == "" || *scratch == "" || *policy == "" || len(peersFlag) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	nrilog.Set(nlog)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; fatal("interrupted") }()
	labels := map[string]string{}
	if len(labelsFlag) == 0 {
		labelsFlag = multi{"koordinator.sh/qosClass=BE"}
	}
	for _, l := range labelsFlag {
		k, v, _ := strings.Cut(l, "=")
		labels[k] = v
	}
	sbx := loadV01(filepath.Join(*fixtures, "sandbox-create.json"))
	ctx := loadV01(filepath.Join(*fixtures, "container-create.json"))

	var peers []*peer
	for i, s := range peersFlag {
		p := parsePeer(s)
		p.start(i)
		peers = append(peers, p)
		fmt.Fprintf(os.Stderr, "nridriver: %s registered (pid %d, cgroup %s)\n", p.name, p.pid, p.cpu.dir)
	}
	if *stormN > 0 {
		storm(peers, *stormN, *inflight, *stormRuns, sbx, ctx, labels)
		return
	}
	t0 := time.Now()
	total := *warmup + *rounds
	var cpuStart, procStart []float64
	phase := map[string]time.Duration{}
	order := rand.New(rand.NewSource(13)) // the peers' order per event (see the top of this file)
	for round := 0; round < total; round++ {
		measured := round >= *warmup
		if round == *warmup {
			for _, p := range peers {
				cpuStart = append(cpuStart, p.cpu.usage())
				procStart = append(procStart, procCPU(p.pid))
			}
		}
		tp := time.Now()
		pods := make([]*pod, len(peers))
		for i, p := range peers {
			pods[i] = p.newPod(i, round, sbx, ctx, labels)
		}
		phase["prepare pods"] += time.Since(tp)
		tp = time.Now()
		// CPU windows: each event of a peer is charged with everything the plugin's process tree
		// does from the event's start until the peer's next event starts (the reply, children
		// exiting and being reaped, a spare being forked), while the other peers run their events
		// in between. Windows are contiguous: nothing the plugin does is left out.
		for _, ev := range append(append([]string{}, events...), "teardown") {
			for _, i := range order.Perm(len(peers)) {
				p := peers[i]
				p.charge(ev, measured)
				dt := p.event(ev, pods[i], round)
				if measured && ev != "teardown" {
					p.lat[ev] = append(p.lat[ev], dt)
				}
				if ev == "StartContainer" && round == *warmup {
					p.checkWork(pods[i])
				}
			}
		}
		phase["events"] += time.Since(tp)
		tp = time.Now()
		for i, p := range peers {
			tc := time.Now()
			p.cleanPod(pods[i], round)
			phase["clean up"] += time.Since(tc)
			if round%10 == 0 || round == total-1 {
				p.sampleRSS()
			}
		}
		phase["clean up, sample"] += time.Since(tp)
	}
	if *verbose {
		for k, v := range phase {
			fmt.Fprintf(os.Stderr, "nridriver: %s: %.2f s\n", k, v.Seconds())
		}
	}
	elapsed := time.Since(t0)
	for _, p := range peers {
		p.charge("", false)
	}
	for i, p := range peers {
		p.cpuTotal = p.cpu.usage() - cpuStart[i]
		p.procTotal = procCPU(p.pid) - procStart[i]
		p.sampleRSS()
		_, p.hwm = procStatus(p.pid)
		for _, m := range nlog.closed {
			if strings.Contains(m, p.file) {
				p.errs["plugin closed by the runtime"]++
			}
		}
	}
	report(peers, elapsed)
}

func report(peers []*peer, elapsed time.Duration) {
	var ref *peer
	for _, p := range peers {
		if p.name == *refName {
			ref = p
		}
	}
	mib := func(k int) string { return fmt.Sprintf("%.2f", float64(k)/1024) }
	fmt.Printf("Native NRI: %d pods per peer (+%d warm-up), peers interleaved event by event in a random order per event (seeded); "+
		"runtime side: containerd/nri pkg/adaptation %s (runtime \"containerd %s\"); %.1f s.\n\n",
		*rounds, *warmup, *nriVer, *runtimeVer, elapsed.Seconds())
	refCol := ""
	if ref != nil {
		refCol = fmt.Sprintf(" p50 / %s | p99 / %s | CPU / %s |", ref.name, ref.name, ref.name)
	}
	fmt.Printf("| event | peer | p50 µs | p90 µs | p99 µs | max µs | CPU µs/event |%s\n", refCol)
	fmt.Printf("|---|---|---|---|---|---|---|%s\n", strings.Repeat("---|", strings.Count(refCol, "|")))
	for _, ev := range events {
		for _, p := range peers {
			l := p.lat[ev]
			c := mean(p.cpuUs[ev])
			fmt.Printf("| %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f |", ev, p.name, pct(l, .5), pct(l, .9), pct(l, .99), pct(l, 1), c)
			if ref != nil {
				rl := ref.lat[ev]
				fmt.Printf(" %s | %s | %s |", ratio(pct(l, .5), pct(rl, .5)), ratio(pct(l, .99), pct(rl, .99)), ratio(c, mean(ref.cpuUs[ev])))
			}
			fmt.Println()
		}
	}
	fmt.Printf("\nCPU per pod (the three events above + teardown: StopContainer, RemoveContainer, StopPodSandbox, RemovePodSandbox) and memory:\n\n")
	fmt.Printf("| peer | CPU µs/pod (3 events) | teardown CPU µs/pod | processes at end | RSS MiB (tree, end) | RSS MiB (tree, max) | VmHWM MiB (plugin process) |")
	if ref != nil {
		fmt.Printf(" CPU / %s | RSS max / %s |", ref.name, ref.name)
	}
	fmt.Printf("\n|---|---|---|---|---|---|---|%s\n", map[bool]string{true: "---|---|", false: ""}[ref != nil])
	for _, p := range peers {
		c3 := mean(p.cpuUs["RunPodSandbox"]) + mean(p.cpuUs["CreateContainer"]) + mean(p.cpuUs["StartContainer"])
		fmt.Printf("| %s | %.0f | %.0f | %d | %s | %s | %s |", p.name, c3, mean(p.cpuUs["teardown"]), p.nprocEnd, mib(p.rssEnd), mib(p.rssMax), mib(p.hwm))
		if ref != nil {
			r3 := mean(ref.cpuUs["RunPodSandbox"]) + mean(ref.cpuUs["CreateContainer"]) + mean(ref.cpuUs["StartContainer"])
			fmt.Printf(" %s | %s |", ratio(c3, r3), ratio(float64(p.rssMax), float64(ref.rssMax)))
		}
		fmt.Println()
	}
	fmt.Printf("\nSame work, checked (CreateContainer adjustment as returned to the runtime; files written in the peer's scratch root after StartContainer of the first measured pod):\n\n")
	fmt.Printf("| peer | adjustment | pod cgroup: files changed | sandbox cgroup: files changed | container cgroup: files changed | /proc/PID/oom_score_adj | errors |\n|---|---|---|---|---|---|---|\n")
	for _, p := range peers {
		var e []string
		for k, v := range p.errs {
			e = append(e, fmt.Sprintf("%s: %d", k, v))
		}
		if p.badAdjust > 0 {
			e = append(e, fmt.Sprintf("differing adjustments: %d", p.badAdjust))
		}
		sort.Strings(e)
		es := strings.Join(e, ", ")
		if es == "" {
			es = "none"
		}
		fmt.Printf("| %s | `%s` | %s | %s | %s | %s | %s |\n", p.name, p.adjust, p.work["pod cgroup"],
			p.work["sandbox cgroup"], p.work["container cgroup"], p.work["/proc/<pid>/oom_score_adj"], es)
	}
	if ref != nil {
		fmt.Println()
		for _, p := range peers {
			if p == ref || p.extra["mode"] == "null" || p.extra["_work"] == "none" {
				continue
			}
			same := p.adjust == ref.adjust
			for k, v := range ref.work {
				same = same && p.work[k] == v
			}
			workDiffers = workDiffers || !same
			fmt.Printf("%s and %s: %s.\n", p.name, ref.name,
				map[bool]string{true: "same adjustment and same writes", false: "DIFFERENT adjustment or writes (not the same work)"}[same])
		}
	}
	fmt.Printf("\nCPU method: %s (the plugin file is a wrapper that enters the cgroup and execs the plugin, so "+
		"every process it forks is counted, reaped or alive). Cross-check over the measured rounds, "+
		"/proc/PID/stat of the plugin process, utime+stime+cutime+cstime (10 ms ticks; reaped children only):",
		peers[0].cpu.method())
	for _, p := range peers {
		fmt.Printf(" %s %.2f s vs cgroup %.2f s;", p.name, p.procTotal/1e6, p.cpuTotal/1e6)
	}
	fmt.Println()
	if *jsonOut != "" {
		type out struct {
			Name    string               `json:"name"`
			Lat     map[string][]float64 `json:"latency_us"`
			CPU     map[string][]float64 `json:"cpu_us"`
			RSSMax  int                  `json:"rss_tree_max_kib"`
			RSSEnd  int                  `json:"rss_tree_end_kib"`
			HWM     int                  `json:"vmhwm_kib"`
			Errs    map[string]int       `json:"errors"`
			Adjust  string               `json:"adjustment"`
			Work    map[string]string    `json:"work"`
			CPUProc float64              `json:"cpu_proc_total_us"`
		}
		var o []out
		for _, p := range peers {
			o = append(o, out{p.name, p.lat, p.cpuUs, p.rssMax, p.rssEnd, p.hwm, p.errs, p.adjust, p.work, p.procTotal})
		}
		b, _ := json.MarshalIndent(o, "", " ")
		must(os.WriteFile(*jsonOut, b, 0o644))
	}
	bad := workDiffers
	for _, p := range peers {
		if len(p.errs) > 0 || p.badAdjust > 0 {
			bad = true
		}
	}
	cleanup()
	if bad {
		fmt.Fprintln(os.Stderr, "nridriver: some peers failed events or did not do the same work (see the tables)")
		os.Exit(1)
	}
}

// started: peers whose plugin may be running; cleanup stops them and removes their cgroups.
var started []*peer

func cleanup() {
	for _, p := range started {
		if p.r != nil {
			p.r.Stop()
		}
		if p.cpu != nil {
			p.cpu.remove()
		}
	}
	started = nil
}

func must(err error) {
	if err != nil {
		fatal("%v", err)
	}
}

func fatal(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "nridriver: "+f+"\n", a...)
	cleanup()
	os.Exit(1)
}
