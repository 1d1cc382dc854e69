// Package hostinfo collects what /v1/agent/host reports about the machine
// an agent runs on: memory, CPUs, the host and the root file system's
// usage, read with gopsutil as Consul's agent does.
package hostinfo

import (
	"context"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/disk"
	"github.com/shirou/gopsutil/v4/host"
	"github.com/shirou/gopsutil/v4/mem"
)

// diskUsagePath is the file system whose usage is reported, as Consul's.
const diskUsagePath = "/"

// Info is Consul's answer to GET /v1/agent/host. A part that could not be
// read is null and its error is listed in Errors; the rest is still
// reported.
type Info struct {
	Memory *mem.VirtualMemoryStat
	CPU    []cpu.InfoStat
	Host   *host.InfoStat
	Disk   *disk.UsageStat
	// CollectionTime is when the collection started, in nanoseconds since
	// the Unix epoch (UTC).
	CollectionTime int64
	// Errors are the messages of the parts that failed.
	Errors []string
}

// Collect reads the host's information now.
func Collect(ctx context.Context) *Info {
	info := &Info{CollectionTime: time.Now().UTC().UnixNano(), Errors: []string{}}
	fail := func(err error) { info.Errors = append(info.Errors, err.Error()) }
	if h, err := host.InfoWithContext(ctx); err != nil {
		fail(err)
	} else {
		info.Host = h
	}
	if m, err := mem.VirtualMemoryWithContext(ctx); err != nil {
		fail(err)
	} else {
		info.Memory = m
	}
	if d, err := disk.UsageWithContext(ctx, diskUsagePath); err != nil {
		fail(err)
	} else {
		info.Disk = d
	}
	if c, err := cpu.InfoWithContext(ctx); err != nil {
		fail(err)
	} else {
		info.CPU = c
	}
	return info
}
