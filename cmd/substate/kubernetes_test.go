package main

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/substatehq/substate/worker"
)

// k8sObject is the part of a Kubernetes object the checks read.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Template struct {
			Metadata struct {
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				Containers []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sContainer struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name      string         `yaml:"name"`
		Value     string         `yaml:"value"`
		ValueFrom map[string]any `yaml:"valueFrom"`
	} `yaml:"env"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe   *k8sProbe `yaml:"startupProbe"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// k8sManifests returns the objects of the kustomization's resources.
func k8sManifests(t *testing.T) []k8sObject {
	t.Helper()
	dir := filepath.Join(deployDir, "kubernetes")
	kust := yamlDocs[struct {
		Resources []string `yaml:"resources"`
	}](t, filepath.Join(dir, "kustomization.yaml"))
	var out []k8sObject
	for _, r := range kust[0].Resources {
		out = append(out, yamlDocs[k8sObject](t, filepath.Join(dir, r))...)
	}
	return out
}

// secretPlaceholders stand in for the substate-secrets Secret, which the
// deployment guide has the operator create.
var secretPlaceholders = map[string]string{"SUBSTATE_INGEST_API_KEY": "k",
	"SUBSTATE_API_KEYS": "ops admin * sha256:52fec68b0cf03573f7493592deab22d499a3e5cca8d47fc529d8c355b076c7b5"}

func TestKubernetesManifests(t *testing.T) {
	known, _ := cliFlags(t, "run")
	objs := k8sManifests(t)
	configMaps := map[string]map[string]string{}
	for _, o := range objs {
		if o.Kind == "ConfigMap" {
			configMaps[o.Metadata.Name] = o.Data
		}
	}
	roles := map[string]string{"substate-ingest": worker.RoleIngest, "substate-projector": worker.RoleProject, "substate-engine": worker.RoleEngine}
	workloads := 0
	for _, o := range objs {
		if o.Kind != "Deployment" && o.Kind != "StatefulSet" {
			continue
		}
		workloads++
		if roles[o.Metadata.Name] == "" {
			t.Errorf("%s %s: no role expected of it", o.Kind, o.Metadata.Name)
			continue
		}
		// The engine owns its executions: one pod, never two at once.
		if roles[o.Metadata.Name] == worker.RoleEngine && (o.Kind != "StatefulSet" || o.Spec.Replicas == nil || *o.Spec.Replicas != 1) {
			t.Errorf("%s %s: the engine must be a StatefulSet of one replica", o.Kind, o.Metadata.Name)
		}
		for _, c := range o.Spec.Template.Spec.Containers {
			t.Run(o.Metadata.Name+"/"+c.Name, func(t *testing.T) {
				f := dryRunContainer(t, known, configMaps, c)
				checkContainer(t, o, c, f, roles[o.Metadata.Name])
			})
		}
	}
	if workloads != 3 {
		t.Fatalf("%d workloads, want the ingest Deployment and the projector and engine StatefulSets", workloads)
	}
}

// dryRunContainer parses the container's command line in its environment.
func dryRunContainer(t *testing.T, known map[string]*kong.Flag, configMaps map[string]map[string]string, c k8sContainer) *worker.Flags {
	t.Helper()
	if c.Image != "substate" || len(c.Args) == 0 || c.Args[0] != "run" {
		t.Fatalf("image %q args %v: want the substate image running \"run\"", c.Image, c.Args)
	}
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			data, ok := configMaps[from.ConfigMapRef.Name]
			if !ok {
				t.Fatalf("no ConfigMap %s", from.ConfigMapRef.Name)
			}
			for k, v := range data {
				env[k] = v
			}
		case from.SecretRef != nil:
			for k, v := range secretPlaceholders {
				env[k] = v
			}
		}
	}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil {
			env[e.Name] = "from-" + e.Name
		}
	}
	setEnv(t, known, "container "+c.Name, env)
	return dryRun(t, "container "+c.Name, c.Args)
}

// checkContainer checks role, instance, probes, port and scrape settings.
func checkContainer(t *testing.T, o k8sObject, c k8sContainer, f *worker.Flags, role string) {
	t.Helper()
	if f.Role != role {
		t.Errorf("role %s, want %s for a %s", f.Role, role, o.Kind)
	}
	if role == worker.RoleProject && f.Instance != "from-SUBSTATE_INSTANCE" {
		t.Errorf("instance %q: each projector replica needs its own, from the pod name", f.Instance)
	}
	if f.NATSURL == "" || f.NATSReplicas < 3 {
		t.Errorf("nats url %q, replicas %d: a cluster deployment needs both", f.NATSURL, f.NATSReplicas)
	}
	_, port, _ := net.SplitHostPort(f.HTTPAddr)
	var httpPort string
	for _, p := range c.Ports {
		if p.Name == "http" {
			httpPort = strconv.Itoa(p.ContainerPort)
		}
	}
	if httpPort == "" || httpPort != port {
		t.Errorf("container port http %q, but the worker listens on %s", httpPort, f.HTTPAddr)
	}
	for probe, want := range map[*k8sProbe]string{c.StartupProbe: "/healthz", c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port != "http" {
			t.Errorf("probe %+v, want GET %s on port http", probe, want)
		}
	}
	if f.MetricsAddr != "" {
		_, port, _ = net.SplitHostPort(f.MetricsAddr)
	}
	a := o.Spec.Template.Metadata.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/path"] != "/metrics" || a["prometheus.io/port"] != port {
		t.Errorf("scrape annotations %v, want /metrics on port %s", a, port)
	}
	// The pod starts: it has the credentials its addresses need.
	if err := f.CheckExposure(); err != nil {
		t.Errorf("the worker would not start: %v", err)
	}
}

func TestNATSValues(t *testing.T) {
	type enabled struct {
		Enabled bool `yaml:"enabled"`
	}
	v := yamlDocs[struct {
		Config struct {
			Cluster struct {
				Enabled  bool `yaml:"enabled"`
				Replicas int  `yaml:"replicas"`
			} `yaml:"cluster"`
			JetStream struct {
				Enabled   bool `yaml:"enabled"`
				FileStore struct {
					Enabled bool    `yaml:"enabled"`
					PVC     enabled `yaml:"pvc"`
				} `yaml:"fileStore"`
			} `yaml:"jetstream"`
			Monitor enabled `yaml:"monitor"`
			Merge   struct {
				MaxPayload string `yaml:"max_payload"`
			} `yaml:"merge"`
		} `yaml:"config"`
		PromExporter enabled `yaml:"promExporter"`
	}](t, filepath.Join(deployDir, "nats", "values.yaml"))[0]
	c := v.Config
	if !c.Cluster.Enabled || c.Cluster.Replicas < 3 || !c.JetStream.Enabled || !c.JetStream.FileStore.Enabled || !c.JetStream.FileStore.PVC.Enabled {
		t.Errorf("config %+v: want a 3-node cluster with JetStream on persistent volumes", c)
	}
	if !c.Monitor.Enabled || !v.PromExporter.Enabled {
		t.Error("monitoring or the Prometheus exporter is off")
	}
	// The embedded server allows 2 MiB: room for a 1 MiB body and headers.
	if got := sizeBytes(c.Merge.MaxPayload); got < 2<<20 {
		t.Errorf("max_payload %q = %d bytes, want at least 2 MiB", c.Merge.MaxPayload, got)
	}
	for _, o := range k8sManifests(t) {
		if n, _ := strconv.Atoi(o.Data["SUBSTATE_REPLICAS"]); o.Kind == "ConfigMap" && n > c.Cluster.Replicas {
			t.Errorf("SUBSTATE_REPLICAS=%d on a cluster of %d", n, c.Cluster.Replicas)
		}
	}
}
