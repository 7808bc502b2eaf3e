package peers

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DiskIRQ says which CPU services the interrupts of the disk that holds a
// directory: the servers' data, whose synced writes end in one of those
// interrupts. The CPU that takes it runs the completion and wakes the
// writer; pinned anywhere else, a server's every sync costs the core it
// runs on nothing and the load generator's core an interrupt and a wake-up
// sent across.
type DiskIRQ struct {
	Device string `json:"device"` // the block device, as sysfs names it ("vda", "nvme0n1p2")
	CPU    int    `json:"cpu"`    // the allowed CPU with the most of its interrupts
}

// diskIRQCPU finds the allowed CPU that has taken the most interrupts of
// the block device holding dir. sysRoot and interrupts are "/sys" and
// "/proc/interrupts" (a test gives a tree of its own). ok is false when
// that cannot be told: a file system on no block device (tmpfs, overlay),
// a device without interrupts of its own (device-mapper, loop), or none
// counted on an allowed CPU yet.
func diskIRQCPU(sysRoot, interrupts, dir string, allowed CPUSet) (DiskIRQ, bool, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return DiskIRQ{}, false, fmt.Errorf("stat %s: %w", dir, err)
	}
	dev := uint64(st.Dev)
	blk, err := filepath.EvalSymlinks(filepath.Join(sysRoot, "dev", "block", fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev))))
	if err != nil {
		return DiskIRQ{}, false, nil // no block device behind dir
	}
	irqs := deviceIRQs(sysRoot, blk)
	if len(irqs) == 0 {
		return DiskIRQ{}, false, nil
	}
	f, err := os.Open(interrupts)
	if err != nil {
		return DiskIRQ{}, false, fmt.Errorf("read interrupts: %w", err)
	}
	defer f.Close()
	perCPU, err := irqCountsPerCPU(f, irqs)
	if err != nil {
		return DiskIRQ{}, false, fmt.Errorf("%s: %w", interrupts, err)
	}
	best, bestN := -1, uint64(0)
	for _, c := range allowed {
		if n := perCPU[c]; n > bestN {
			best, bestN = c, n
		}
	}
	if best < 0 {
		return DiskIRQ{}, false, nil
	}
	return DiskIRQ{Device: filepath.Base(blk), CPU: best}, true, nil
}

// deviceIRQs walks up from a block device's sysfs directory to the first
// device that owns interrupts (a PCI function: msi_irqs for MSI and MSI-X,
// else its legacy irq) and returns their numbers.
func deviceIRQs(sysRoot, blk string) []int {
	stop := filepath.Join(sysRoot, "devices")
	for d := blk; strings.HasPrefix(d, stop+string(filepath.Separator)); d = filepath.Dir(d) {
		if ents, err := os.ReadDir(filepath.Join(d, "msi_irqs")); err == nil && len(ents) > 0 {
			var out []int
			for _, e := range ents {
				if n, err := strconv.Atoi(e.Name()); err == nil {
					out = append(out, n)
				}
			}
			return out
		}
		if b, err := os.ReadFile(filepath.Join(d, "irq")); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
				return []int{n}
			}
		}
	}
	return nil
}

// irqCountsPerCPU sums, per CPU number, the counts that /proc/interrupts
// gives for the interrupts in irqs. Its first line names the CPU columns
// ("CPU0 CPU1 ..."; offline CPUs are left out, so a column is not always
// its number).
func irqCountsPerCPU(r io.Reader, irqs []int) (map[int]uint64, error) {
	want := map[string]bool{}
	for _, n := range irqs {
		want[strconv.Itoa(n)] = true
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if !sc.Scan() {
		return nil, fmt.Errorf("empty")
	}
	var cols []int
	for _, h := range strings.Fields(sc.Text()) {
		n, err := strconv.Atoi(strings.TrimPrefix(h, "CPU"))
		if err != nil || !strings.HasPrefix(h, "CPU") {
			return nil, fmt.Errorf("header %q: not a CPU column", h)
		}
		cols = append(cols, n)
	}
	out := map[int]uint64{}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !want[strings.TrimSuffix(f[0], ":")] {
			continue
		}
		for i, c := range cols {
			if i+1 >= len(f) {
				break
			}
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				break // the line's description begins
			}
			out[c] += n
		}
	}
	return out, sc.Err()
}
