package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testArchive(t *testing.T) (Meta, []byte, []byte) {
	t.Helper()
	state := bytes.Repeat([]byte("trellis state record "), 500)
	meta := Meta{
		ID: "2-57-1700000000000", Index: 57, Term: 2, Version: 1,
		Records: []RecordCount{{Type: "Node", Count: 3}, {Type: "KV", Count: 7}},
		Created: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC),
	}
	var buf bytes.Buffer
	if err := Write(&buf, meta, state); err != nil {
		t.Fatal(err)
	}
	meta.Format, meta.Size = FormatVersion, int64(len(state))
	return meta, state, buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	meta, state, archive := testArchive(t)
	gotMeta, gotState, err := Read(bytes.NewReader(archive), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotMeta, meta) {
		t.Errorf("meta:\n got %+v\nwant %+v", gotMeta, meta)
	}
	if !bytes.Equal(gotState, state) {
		t.Error("state differs")
	}
}

// rawArchive builds a gzipped tar of the given files, to forge archives
// Write would never produce.
func rawArchive(t *testing.T, files ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o600, Size: int64(len(f[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadRefuses(t *testing.T) {
	_, state, archive := testArchive(t)
	metaV1 := `{"Format":1,"Size":5}`
	goodSums := sum([]byte(metaV1)) + "  meta.json\n" + sum([]byte("state")) + "  state.bin\n"
	cases := []struct {
		name     string
		data     []byte
		maxState int64
		want     error
		mention  string
	}{
		{"empty", nil, 1 << 20, ErrCorrupt, "gzip"},
		{"not gzip", []byte("PK\x03\x04 a zip file"), 1 << 20, ErrCorrupt, "gzip"},
		{"truncated in the state", archive[:len(archive)/2], 1 << 20, ErrCorrupt, ""},
		{"truncated before the end", archive[:len(archive)-4], 1 << 20, ErrCorrupt, ""},
		{"state over the limit", archive, int64(len(state)) - 1, ErrTooLarge, "state.bin"},
		{"newer format", rawArchive(t, [2]string{"meta.json", `{"Format":2}`}), 1 << 20, ErrFormat, "version 2"},
		{"files out of order", rawArchive(t, [2]string{"state.bin", "x"}), 1 << 20, ErrCorrupt, "meta.json"},
		{"sums missing", rawArchive(t, [2]string{"meta.json", metaV1}, [2]string{"state.bin", "state"}), 1 << 20, ErrCorrupt, "SHA256SUMS missing"},
		{"state changed", rawArchive(t, [2]string{"meta.json", metaV1}, [2]string{"state.bin", "stat!"}, [2]string{"SHA256SUMS", goodSums}), 1 << 20, ErrCorrupt, "SHA-256 of state.bin"},
		{"sum of state missing", rawArchive(t, [2]string{"meta.json", metaV1}, [2]string{"state.bin", "state"}, [2]string{"SHA256SUMS", sum([]byte(metaV1)) + "  meta.json\n"}), 1 << 20, ErrCorrupt, "no sum for state.bin"},
		{"extra file", rawArchive(t, [2]string{"meta.json", metaV1}, [2]string{"state.bin", "state"}, [2]string{"SHA256SUMS", goodSums}, [2]string{"more", ""}), 1 << 20, ErrCorrupt, "after SHA256SUMS"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Read(bytes.NewReader(tc.data), tc.maxState)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("err = %q, want it to mention %q", err, tc.mention)
			}
		})
	}
}

// TestReadNeverReturnsChangedContent flips every byte of an archive past
// gzip's header (whose timestamp and OS bytes no checksum covers, and
// which say nothing of the content): Read must fail or return exactly the
// original meta and state.
func TestReadNeverReturnsChangedContent(t *testing.T) {
	meta, state, archive := testArchive(t)
	const gzipHeader = 10
	for i := gzipHeader; i < len(archive); i++ {
		bad := bytes.Clone(archive)
		bad[i] ^= 0xff
		gotMeta, gotState, err := Read(bytes.NewReader(bad), 1<<20)
		if err != nil {
			continue
		}
		if !reflect.DeepEqual(gotMeta, meta) || !bytes.Equal(gotState, state) {
			t.Fatalf("byte %d flipped: Read returned changed content without an error", i)
		}
	}
}

// FuzzRead: no input makes Read panic, and whatever it accepts writes back
// to an archive that reads the same.
func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	if err := Write(&buf, Meta{ID: "1-2-3", Index: 2, Term: 1, Version: 1}, []byte("state")); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		meta, state, err := Read(bytes.NewReader(data), 1<<16)
		if err != nil {
			return
		}
		var again bytes.Buffer
		if err := Write(&again, meta, state); err != nil {
			t.Fatal(err)
		}
		meta2, state2, err := Read(&again, 1<<16)
		if err != nil || !reflect.DeepEqual(meta, meta2) || !bytes.Equal(state, state2) {
			t.Fatalf("an accepted archive does not round-trip: %v", err)
		}
	})
}

// TestStreams: WriteStream archives a state it reads as it goes and
// refuses one that is not meta.Size bytes; ReadStream copies the state
// out with no limit when asked, and refuses an oversized state before
// copying any of it.
func TestStreams(t *testing.T) {
	meta, state, archive := testArchive(t)
	var viaStream bytes.Buffer
	if err := WriteStream(&viaStream, meta, bytes.NewReader(state)); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	got, err := ReadStream(&viaStream, &out, -1)
	if err != nil || !reflect.DeepEqual(got, meta) || !bytes.Equal(out.Bytes(), state) {
		t.Fatalf("stream round trip: meta %+v, %d state bytes, %v", got, out.Len(), err)
	}
	for _, size := range []int64{meta.Size + 1, meta.Size - 1} {
		m := meta
		m.Size = size
		err := WriteStream(&bytes.Buffer{}, m, bytes.NewReader(state))
		if size > int64(len(state)) && err == nil {
			t.Errorf("size %d of a %d-byte state: no error", size, len(state))
		}
		if size < int64(len(state)) {
			// The state is cut at meta.Size: the archive holds that
			// much and verifies.
			if err != nil {
				t.Errorf("size %d: %v", size, err)
			}
		}
	}
	out.Reset()
	if _, err := ReadStream(bytes.NewReader(archive), &out, meta.Size-1); !errors.Is(err, ErrTooLarge) || out.Len() != 0 {
		t.Fatalf("over the limit: %v with %d bytes copied, want ErrTooLarge and none", err, out.Len())
	}
}
