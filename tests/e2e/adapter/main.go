// v010-adapter (TEST ONLY, never shipped): a native NRI plugin that replays pod/container
// lifecycle events to NRI v0.1 one-shot hooks listed in /etc/nri/conf.json
// (/opt/nri/bin/<type> invoke), through the v0.1 client in the github.com/containerd/nri module.
// It lets the e2e suite drive nri-qos's v0.1 path under containerd 1.7, which no longer runs
// v0.1 hooks itself. Built offline from Debian trixie's golang-*-dev packages (GOPATH mode)
// because golang-github-containerd-nri-dev does not ship upstream's plugins/v010-adapter.
//
// Event mapping (same as upstream's adapter):
//
//	RunPodSandbox  -> v0.1 "create" (id = sandbox id)
//	StartContainer -> v0.1 "create" (id = container id); an error fails StartContainer
//	StopContainer  -> v0.1 "delete" (errors ignored)
//	StopPodSandbox -> v0.1 "delete"
//
// Plugin config (/etc/nri/conf.d/00-v010-adapter.conf, optional): {"log": "/path/file"} appends
// one line per invocation to that file.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	nriv01 "github.com/containerd/nri"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	typesv01 "github.com/containerd/nri/types/v1"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
)

type adapter struct {
	logf *os.File
}

// task implements the Task interface the v0.1 client needs (id, pid, OCI spec).
type task struct {
	id   string
	pid  uint32
	spec *rspec.Spec
}

func (t *task) ID() string                                { return t.id }
func (t *task) Pid() uint32                               { return t.pid }
func (t *task) Spec(context.Context) (*rspec.Spec, error) { return t.spec, nil }

func (a *adapter) logln(format string, args ...interface{}) {
	if a.logf != nil {
		fmt.Fprintf(a.logf, time.Now().Format(time.RFC3339Nano)+" "+format+"\n", args...)
	}
}

// specFor rebuilds the part of the OCI spec a v0.1 hook reads (annotations, namespaces,
// resources, cgroupsPath) from NRI data.
func specFor(ann map[string]string, nss []*api.LinuxNamespace, res *api.LinuxResources, cgroupsPath string) *rspec.Spec {
	var ociRes *rspec.LinuxResources
	if res != nil {
		ociRes = res.ToOCI()
	}
	var ns []rspec.LinuxNamespace
	for _, n := range nss {
		ns = append(ns, rspec.LinuxNamespace{Type: rspec.LinuxNamespaceType(n.GetType()), Path: n.GetPath()})
	}
	return &rspec.Spec{
		Annotations: ann,
		Linux:       &rspec.Linux{Namespaces: ns, Resources: ociRes, CgroupsPath: cgroupsPath},
	}
}

func (a *adapter) invoke(ctx context.Context, pod *api.PodSandbox, t *task, state typesv01.State) error {
	client, err := nriv01.New() // re-reads /etc/nri/conf.json on every event, like containerd 1.6
	if err != nil {
		a.logln("v0.1 client: %v", err)
		return err
	}
	sb := &nriv01.Sandbox{ID: pod.GetId(), Labels: pod.GetLabels()}
	results, err := client.InvokeWithSandbox(ctx, t, state, sb)
	a.logln("invoke state=%s id=%s pid=%d results=%d err=%v", state, t.id, t.pid, len(results), err)
	return err
}

func (a *adapter) Configure(_ context.Context, config, runtime, version string) (api.EventMask, error) {
	var cfg struct {
		Log string `json:"log"`
	}
	if config != "" {
		if err := json.Unmarshal([]byte(config), &cfg); err != nil {
			return 0, fmt.Errorf("v010-adapter: bad config: %w", err)
		}
	}
	if cfg.Log != "" {
		a.logf, _ = os.OpenFile(cfg.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	}
	a.logln("Configure runtime=%s version=%s pid=%d", runtime, version, os.Getpid())
	return 0, nil // 0: every event this plugin implements
}

func podTask(pod *api.PodSandbox) *task {
	l := pod.GetLinux()
	return &task{id: pod.GetId(), pid: pod.GetPid(),
		spec: specFor(pod.GetAnnotations(), l.GetNamespaces(), l.GetResources(), l.GetCgroupsPath())}
}

func ctrTask(c *api.Container) *task {
	l := c.GetLinux()
	return &task{id: c.GetId(), pid: c.GetPid(),
		spec: specFor(c.GetAnnotations(), l.GetNamespaces(), l.GetResources(), l.GetCgroupsPath())}
}

func (a *adapter) RunPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return a.invoke(ctx, pod, podTask(pod), typesv01.Create)
}

func (a *adapter) StopPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return a.invoke(ctx, pod, podTask(pod), typesv01.Delete)
}

func (a *adapter) StartContainer(ctx context.Context, pod *api.PodSandbox, c *api.Container) error {
	return a.invoke(ctx, pod, ctrTask(c), typesv01.Create)
}

func (a *adapter) StopContainer(ctx context.Context, pod *api.PodSandbox, c *api.Container) ([]*api.ContainerUpdate, error) {
	_ = a.invoke(ctx, pod, ctrTask(c), typesv01.Delete) // a failing delete must not block stop
	return nil, nil
}

func main() {
	a := &adapter{}
	s, err := stub.New(a, stub.WithOnClose(func() { a.logln("connection closed, exiting"); os.Exit(0) }))
	if err != nil {
		fmt.Fprintf(os.Stderr, "v010-adapter: %v\n", err)
		os.Exit(1)
	}
	if err := s.Run(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "v010-adapter: %v\n", err)
		os.Exit(1)
	}
}
