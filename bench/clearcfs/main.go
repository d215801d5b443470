// clearcfs: the Go peer of nri-qos's one-shot (NRI v0.1) mode for `make bench` (bench/run.sh).
// It does what containerd/nri's v0.1 example plugin clearcfs does (containerd/nri v0.1.x
// examples/clearcfs/main.go, clearCFS.Invoke), written on the same library, containerd/nri's
// skel (skel.Run: decode the request from stdin, Invoke, encode the Result to stdout):
// on a `create`, when the request's annotations say qos.class = ls, set the container's CFS
// quota to -1 (cgroup v1 cpu.cfs_quota_us).
//
// Lighter than the example (so the ratio against it is conservative): no logging (the example
// logs seven logrus lines per create), and the quota file is written directly instead of
// through containerd/cgroups (not in Debian's NRI library closure; its cgroups.Load opens every
// v1 controller). The example read a top-level annotations map of the v0.1.x request type;
// types/v1 of NRI 0.6 has the annotations in spec.annotations, where containerd puts them, so
// that is what this peer reads. The benchmark's requests carry no qos.class, so on them it
// decodes, decides and answers without writing: the cost every v0.1 Go plugin pays.
//
// Usage (as containerd runs a v0.1 plugin): clearcfs invoke [--cgroup-root DIR] < request
// (--cgroup-root: cgroup v1 root, default /sys/fs/cgroup; the benchmark's scratch tree).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/nri/skel"
	types "github.com/containerd/nri/types/v1"
)

type clearCFS struct{ root string }

func (c *clearCFS) Type() string { return "clearcfs" }

func (c *clearCFS) Invoke(_ context.Context, r *types.Request) (*types.Result, error) {
	result := r.NewResult(c.Type())
	if r.State != types.Create {
		return result, nil
	}
	if r.Spec != nil && r.Spec.Annotations["qos.class"] == "ls" {
		path := filepath.Join(c.root, "cpu", r.Spec.CgroupsPath, "cpu.cfs_quota_us")
		if err := os.WriteFile(path, []byte("-1"), 0o644); err != nil {
			return nil, err
		}
	}
	return result, nil
}

func main() {
	c := &clearCFS{root: "/sys/fs/cgroup"}
	for i := 2; i+1 < len(os.Args); i++ {
		if os.Args[i] == "--cgroup-root" {
			c.root = os.Args[i+1]
		}
	}
	if err := skel.Run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
