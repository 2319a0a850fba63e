package registration

import (
	"strings"
	"testing"
)

func validReg() Registration {
	return Registration{
		PodNamespace:  "kube-system",
		PodName:       "glusterfs-mount-x7k2p",
		PodUID:        "0c9f2d1e-5b7a-4c3e-9f10-2a6b8d4e1f00",
		ContainerName: "mount",
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Registration)
		wantErr string
	}{
		{"valid", func(*Registration) {}, ""},
		{"missing namespace", func(r *Registration) { r.PodNamespace = "" }, "podNamespace is missing"},
		{"missing pod name", func(r *Registration) { r.PodName = "" }, "podName is missing"},
		{"missing uid", func(r *Registration) { r.PodUID = "" }, "podUID is missing"},
		{"missing container", func(r *Registration) { r.ContainerName = "" }, "containerName is missing"},
		{"namespace upper case", func(r *Registration) { r.PodNamespace = "Kube" }, "podNamespace"},
		{"namespace with dot", func(r *Registration) { r.PodNamespace = "a.b" }, "podNamespace"},
		{"pod name with slash", func(r *Registration) { r.PodName = "a/b" }, "podName"},
		{"pod name too long", func(r *Registration) { r.PodName = strings.Repeat("a", 254) }, "podName"},
		{"container with underscore", func(r *Registration) { r.ContainerName = "a_b" }, "containerName"},
		{"uid with space", func(r *Registration) { r.PodUID = "a b" }, "podUID"},
		{"uid with newline", func(r *Registration) { r.PodUID = "a\nb" }, "podUID"},
		{"uid too long", func(r *Registration) { r.PodUID = strings.Repeat("a", 129) }, "podUID"},
		{"exec socket", func(r *Registration) { r.ExecSocket = ".exec/0c9f.sock" }, ""},
		{"exec socket plain name", func(r *Registration) { r.ExecSocket = "exec.sock" }, ""},
		{"exec socket absolute", func(r *Registration) { r.ExecSocket = "/var/lib/kubelet/x.sock" }, "execSocket"},
		{"exec socket escapes", func(r *Registration) { r.ExecSocket = "../x.sock" }, "execSocket"},
		{"exec socket escapes inside", func(r *Registration) { r.ExecSocket = ".exec/../../x.sock" }, "execSocket"},
		{"exec socket unclean", func(r *Registration) { r.ExecSocket = ".exec//x.sock" }, "execSocket"},
		{"exec socket trailing slash", func(r *Registration) { r.ExecSocket = ".exec/" }, "execSocket"},
		{"exec socket dot", func(r *Registration) { r.ExecSocket = "." }, "execSocket"},
		{"exec socket space", func(r *Registration) { r.ExecSocket = ".exec/a b.sock" }, "execSocket"},
		{"exec socket too long", func(r *Registration) { r.ExecSocket = strings.Repeat("a", 101) }, "execSocket"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := validReg()
			tc.mutate(&r)
			err := r.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
	}{
		{"valid", `{"podNamespace":"ns","podName":"p","podUID":"u","containerName":"c"}`, ""},
		{"unknown field tolerated", `{"podNamespace":"ns","podName":"p","podUID":"u","containerName":"c","futureField":"/x"}`, ""},
		{"bad exec socket", `{"podNamespace":"ns","podName":"p","podUID":"u","containerName":"c","execSocket":"/x"}`, "execSocket"},
		{"trailing newline", "{\"podNamespace\":\"ns\",\"podName\":\"p\",\"podUID\":\"u\",\"containerName\":\"c\"}\n", ""},
		{"empty", ``, "malformed JSON"},
		{"null", `null`, "missing"},
		{"array", `[]`, "malformed JSON"},
		{"truncated", `{"podNamespace":"ns","podName":"p"`, "malformed JSON"},
		{"wrong type", `{"podNamespace":1,"podName":"p","podUID":"u","containerName":"c"}`, "malformed JSON"},
		{"two objects", `{"podNamespace":"ns","podName":"p","podUID":"u","containerName":"c"}{}`, "data after"},
		{"missing container", `{"podNamespace":"ns","podName":"p","podUID":"u"}`, "containerName is missing"},
		{"bad namespace", `{"podNamespace":"../x","podName":"p","podUID":"u","containerName":"c"}`, "podNamespace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Decode([]byte(tc.in))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Decode = %v", err)
				}
				if r != (Registration{PodNamespace: "ns", PodName: "p", PodUID: "u", ContainerName: "c"}) {
					t.Fatalf("Decode = %+v", r)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Decode = %+v, %v; want an error containing %q", r, err, tc.wantErr)
			}
		})
	}
}

func TestEncodeKeys(t *testing.T) {
	b, err := Encode(validReg())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"podNamespace":"kube-system","podName":"glusterfs-mount-x7k2p","podUID":"0c9f2d1e-5b7a-4c3e-9f10-2a6b8d4e1f00","containerName":"mount"}` + "\n"
	if string(b) != want {
		t.Fatalf("Encode = %s, want %s", b, want)
	}
	if _, err := Encode(Registration{}); err == nil {
		t.Fatal("Encode accepted an empty registration")
	}
}

func TestExecSocketRoundTrip(t *testing.T) {
	r := validReg()
	r.ExecSocket = ".exec/" + r.PodUID + ".sock"
	b, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `,"execSocket":".exec/0c9f2d1e-5b7a-4c3e-9f10-2a6b8d4e1f00.sock"}`) {
		t.Fatalf("Encode = %s", b)
	}
	got, err := Decode(b)
	if err != nil || got != r {
		t.Fatalf("Decode(Encode(r)) = %+v, %v; want %+v", got, err, r)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"podNamespace":"ns","podName":"p","podUID":"u","containerName":"c"}`))
	f.Add([]byte(`{"podNamespace":"kube-system","podName":"a.b","podUID":"0c9f","containerName":"mount","extra":{"x":[1,2]}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"podNamespace":"ns"`))
	f.Add([]byte("\x00\xff{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Decode(data)
		if err != nil {
			return
		}
		if verr := r.Validate(); verr != nil {
			t.Fatalf("Decode returned an invalid registration %+v: %v", r, verr)
		}
		enc, err := Encode(r)
		if err != nil {
			t.Fatalf("Encode of a decoded registration: %v", err)
		}
		r2, err := Decode(enc)
		if err != nil || r2 != r {
			t.Fatalf("round trip: %+v -> %s -> %+v, %v", r, enc, r2, err)
		}
	})
}
