// Pod storm (issue #22 §3, `make bench` part "storm"): a node receiving -storm pods at once, each
// a sandbox and two containers (RunPodSandbox, then per container CreateContainer and
// StartContainer, in order), with at most -inflight requests issued at a time across the pods.
// containerd/nri's adaptation serialises the events it hands to plugins (Adaptation.Lock in every
// event method, pkg/adaptation/adaptation.go), as containerd does: the in-flight requests queue
// there, so a request's time is its wait plus the plugin's answer — what a pod start sees on a
// node under a storm. Runs are interleaved by peer (run r starts with peer r mod n).
//
// Per peer: p50/p99/max of every request, failures (an error from the adaptation: a plugin
// error, or its request timeout, 2 s by default — counted apart), the peak number of processes
// in the plugin's cgroup and the peak RSS of that tree, sampled every 2 ms during the storm, and
// the CPU per pod: the plugin cgroup's usage (cpuMeter, as in the native part) from the storm's
// first request until 100 ms after its last answer (what the plugin does after an answer — an
// evaluator's records and exit, the next spare — included; the teardown events are not), over
// the pods, median of the runs.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
)

type stormResult struct {
	Name      string    `json:"name"`
	Lat       []float64 `json:"latency_us"`
	Fail      int       `json:"failures"`
	Timeout   int       `json:"timeouts"`
	PeakProcs int       `json:"peak_processes"`
	PeakRSS   int       `json:"peak_rss_kib"`
	WallS     []float64 `json:"storm_wall_s"`
	CPUPod    []float64 `json:"cpu_us_per_pod"` // per run: the plugin cgroup's CPU over the storm / pods
}

// secondCtr is pd's second container: the same spec under its own id and cgroup.
func (p *peer) secondCtr(pd *pod) *api.Container {
	c := *pd.ctr
	c.Id = pd.ctr.Id[:len(pd.ctr.Id)-1] + "f"
	c.Name = pd.ctr.Name + "-2"
	l := *pd.ctr.Linux
	l.CgroupsPath = pd.sb.Linux.CgroupParent + "/" + c.Id
	c.Linux = &l
	c.Annotations = copyMap(pd.ctr.Annotations)
	c.Annotations["io.kubernetes.cri.container-name"] = c.Name
	p.mkCgroup(l.CgroupsPath)
	return &c
}

// stormOnce plays one storm against p: n pods, at most k requests in flight.
func (p *peer) stormOnce(res *stormResult, run, n, k int, sbx, ctx *v01, labels map[string]string, idx int) {
	pods := make([]*pod, n)
	ctr2 := make([]*api.Container, n)
	for i := range pods {
		round := 1000000 + run*10000 + i
		pods[i] = p.newPod(idx, round, sbx, ctx, labels)
		ctr2[i] = p.secondCtr(pods[i])
	}
	sem := make(chan struct{}, k)
	var mu sync.Mutex
	do := func(f func(context.Context) error) {
		sem <- struct{}{}
		t0 := time.Now()
		err := f(context.Background())
		dt := float64(time.Since(t0).Nanoseconds()) / 1000
		<-sem
		mu.Lock()
		res.Lat = append(res.Lat, dt)
		if err != nil {
			if strings.Contains(err.Error(), "timeout") || strings.Contains(err.Error(), "deadline") || dt >= 2e6 {
				res.Timeout++
			} else {
				res.Fail++
			}
			if res.Fail+res.Timeout <= 3 {
				fmt.Fprintf(os.Stderr, "nridriver: storm %s: %v\n", p.name, err)
			}
		}
		mu.Unlock()
	}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // peak processes and RSS of the plugin's tree
		defer close(sampled)
		for {
			sum, np := p.treeRSS()
			if np > res.PeakProcs {
				res.PeakProcs = np
			}
			if sum > res.PeakRSS {
				res.PeakRSS = sum
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	u0 := p.cpu.usage()
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := range pods {
		wg.Add(1)
		go func(pd *pod, c2 *api.Container, pid uint32) {
			defer wg.Done()
			do(func(c context.Context) error { return p.r.RunPodSandbox(c, &api.StateChangeEvent{Pod: pd.sb}) })
			for j, c := range []*api.Container{pd.ctr, c2} {
				do(func(cx context.Context) error {
					_, err := p.r.CreateContainer(cx, &api.CreateContainerRequest{Pod: pd.sb, Container: c})
					return err
				})
				c.State = api.ContainerState_CONTAINER_RUNNING
				c.Pid = pid + uint32(j)
				do(func(cx context.Context) error {
					return p.r.StartContainer(cx, &api.StateChangeEvent{Pod: pd.sb, Container: c})
				})
			}
		}(pods[i], ctr2[i], uint32(300000+1000000+run*10000+i))
	}
	wg.Wait()
	res.WallS = append(res.WallS, time.Since(t0).Seconds())
	time.Sleep(100 * time.Millisecond) // the last answers' after-work (see the top of this file)
	res.CPUPod = append(res.CPUPod, (p.cpu.usage()-u0)/float64(n))
	close(stop)
	<-sampled
	ctx0 := context.Background()
	for i, pd := range pods { // teardown, unmeasured
		for _, c := range []*api.Container{pd.ctr, ctr2[i]} {
			c.State = api.ContainerState_CONTAINER_STOPPED
			p.r.StopContainer(ctx0, &api.StopContainerRequest{Pod: pd.sb, Container: c})
			p.r.RemoveContainer(ctx0, &api.StateChangeEvent{Pod: pd.sb, Container: c})
		}
		p.r.StopPodSandbox(ctx0, &api.StateChangeEvent{Pod: pd.sb})
		p.r.RemovePodSandbox(ctx0, &api.StateChangeEvent{Pod: pd.sb})
		p.cleanPod(pd, 1000000+run*10000+i)
	}
}

// storm runs -storm-runs storms per peer, interleaved, and prints the table (and -json).
func storm(peers []*peer, n, k, runs int, sbx, ctx *v01, labels map[string]string) {
	res := make([]*stormResult, len(peers))
	for i, p := range peers {
		res[i] = &stormResult{Name: p.name}
	}
	for run := 0; run < runs; run++ {
		for j := range peers {
			i := (run + j) % len(peers)
			peers[i].stormOnce(res[i], run, n, k, sbx, ctx, labels, i)
		}
	}
	fmt.Printf("Pod storm: %d pods at once (sandbox + 2 containers: 5 requests each), at most %d requests in flight, "+
		"%d runs per peer interleaved; NRI request timeout 2 s (adaptation default).\n\n", n, k, runs)
	fmt.Printf("| peer | requests | p50 µs | p90 µs | p99 µs | max µs | failures | timeouts | storm wall s (median) | CPU µs/pod (median run) | peak processes | peak RSS MiB (tree) |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res {
		fmt.Printf("| %s | %d | %.0f | %.0f | %.0f | %.0f | %d | %d | %.2f | %.0f | %d | %.2f |\n", r.Name, len(r.Lat),
			pct(r.Lat, .5), pct(r.Lat, .9), pct(r.Lat, .99), pct(r.Lat, 1), r.Fail, r.Timeout, pct(r.WallS, .5),
			pct(r.CPUPod, .5), r.PeakProcs, float64(r.PeakRSS)/1024)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", " ")
		must(os.WriteFile(*jsonOut, b, 0o644))
	}
}
