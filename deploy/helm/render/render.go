// Command render renders a Helm chart's templates offline, for tests/packaging.sh where Helm
// itself is not available (Debian packages no helm). It implements the part of `helm template`
// the nri-qos chart uses: .Values (values.yaml deep-merged with -f files and --set a.b=c
// typed as Helm's strvals types them: true/false, integers, null), .Release.{Name,Namespace,Service}, .Chart.{Name,Version,AppVersion},
// .Files.Get, the sprig function map (Debian golang-github-masterminds-sprig-dev, as Helm uses)
// plus Helm's include, toYaml and tpl. Output: the rendered documents, "---" separated, empty
// ones dropped; a template error (fail, a missing key) exits 1 with the message on stderr.
//
// With --values-json FILE it writes the merged values there as JSON (render.sh checks them
// against the chart's values.schema.json, as Helm does) and renders nothing.
//
// Usage: render CHART_DIR [-f VALUES.yaml]... [--set key.path=value]... [--namespace NS] [--values-json FILE]
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"gopkg.in/yaml.v3"
)

func die(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "render: "+format+"\n", a...)
	os.Exit(1)
}

func readYAML(path string) map[string]interface{} {
	b, err := os.ReadFile(path)
	if err != nil {
		die("%v", err)
	}
	m := map[string]interface{}{}
	if err := yaml.Unmarshal(b, &m); err != nil {
		die("%s: %v", path, err)
	}
	return m
}

// merge copies src into dst, recursing where both hold maps (Helm's coalescing of values).
func merge(dst, src map[string]interface{}) {
	for k, v := range src {
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

func toYaml(v interface{}) string {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

type files struct{ dir string }

func (f files) Get(name string) string {
	b, err := os.ReadFile(filepath.Join(f.dir, name))
	if err != nil {
		return ""
	}
	return string(b)
}

// setValue types a --set value as Helm's strvals parser does (helm/pkg/strvals parser.go
// typedVal): "true"/"false" → bool, "null" → nil, a decimal integer without a leading zero →
// int64, anything else a string.
func setValue(v string) interface{} {
	switch strings.ToLower(v) {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if v != "" && (v == "0" || v[0] != '0') {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return v
}

func main() {
	if len(os.Args) < 2 {
		die("usage: render CHART_DIR [-f VALUES]... [--set k=v]... [--namespace NS]")
	}
	chart := os.Args[1]
	values := readYAML(filepath.Join(chart, "values.yaml"))
	ns := "kube-system"
	valuesJSON := ""
	for i := 2; i < len(os.Args); i++ {
		switch a := os.Args[i]; a {
		case "-f", "--set", "--namespace", "--values-json":
			if i+1 >= len(os.Args) {
				die("%s needs a value", a)
			}
			i++
			v := os.Args[i]
			switch a {
			case "-f":
				merge(values, readYAML(v))
			case "--namespace":
				ns = v
			case "--values-json":
				valuesJSON = v
			default:
				kv := strings.SplitN(v, "=", 2)
				if len(kv) != 2 {
					die("--set %q: want key=value", v)
				}
				m := values
				keys := strings.Split(kv[0], ".")
				for _, k := range keys[:len(keys)-1] {
					sub, ok := m[k].(map[string]interface{})
					if !ok {
						sub = map[string]interface{}{}
						m[k] = sub
					}
					m = sub
				}
				m[keys[len(keys)-1]] = setValue(kv[1])
			}
		default:
			die("unknown argument %q", a)
		}
	}
	if valuesJSON != "" {
		b, err := json.Marshal(values)
		if err != nil {
			die("values: %v", err)
		}
		if err := os.WriteFile(valuesJSON, b, 0o644); err != nil {
			die("%v", err)
		}
		return
	}
	meta := readYAML(filepath.Join(chart, "Chart.yaml"))
	data := map[string]interface{}{
		"Values":  values,
		"Release": map[string]interface{}{"Name": "nri-qos", "Namespace": ns, "Service": "Helm"},
		"Chart":   map[string]interface{}{"Name": meta["name"], "Version": meta["version"], "AppVersion": meta["appVersion"]},
		"Files":   files{chart},
	}
	root := template.New("chart").Option("missingkey=zero")
	funcs := sprig.TxtFuncMap()
	funcs["toYaml"] = toYaml
	funcs["include"] = func(name string, d interface{}) (string, error) {
		var b bytes.Buffer
		err := root.ExecuteTemplate(&b, name, d)
		return b.String(), err
	}
	funcs["tpl"] = func(text string, d interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var b bytes.Buffer
		err = t.Execute(&b, d)
		return b.String(), err
	}
	root.Funcs(funcs)
	paths, _ := filepath.Glob(filepath.Join(chart, "templates", "*"))
	sort.Strings(paths)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			die("%v", err)
		}
		if _, err := root.New(filepath.Base(p)).Parse(string(b)); err != nil {
			die("%v", err)
		}
	}
	var out []string
	for _, p := range paths {
		base := filepath.Base(p)
		if strings.HasPrefix(base, "_") {
			continue
		}
		var b bytes.Buffer
		if err := root.ExecuteTemplate(&b, base, data); err != nil {
			die("%v", err)
		}
		for _, doc := range strings.Split(b.String(), "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			out = append(out, "# Source: "+filepath.Join(filepath.Base(chart), "templates", base)+"\n"+strings.TrimLeft(doc, "\n"))
		}
	}
	fmt.Print(strings.Join(out, "\n---\n"), "\n")
}
