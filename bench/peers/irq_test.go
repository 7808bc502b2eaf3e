package peers

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A /proc/interrupts as a two-CPU virtual machine writes it: the disk's
// request queue (IRQ 36) is serviced by CPU1, its config interrupt (35)
// once by CPU1, the network's by CPU0.
const interruptsTwoCPUs = `           CPU0       CPU1       
 24:          2          0  IO-APIC   5-edge      ACPI:Ged
 35:          0          2  PCI-MSIX-0000:00:02.0   0-edge      virtio1-config
 36:          0   34309192  PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
 41:       7606          0  PCI-MSIX-0000:00:04.0   1-edge      virtio3-rx
NMI:          0          0   Non-maskable interrupts
LOC:   24545454   31305251   Local timer interrupts
ERR:          0
`

func TestIRQCountsPerCPU(t *testing.T) {
	got, err := irqCountsPerCPU(strings.NewReader(interruptsTwoCPUs), []int{35, 36})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 34309194 {
		t.Fatalf("counts %v, want CPU1 34309194 and CPU0 0", got)
	}
	// Offline CPUs have no column: the header, not the position, says
	// which CPU a count belongs to.
	sparse := "   CPU0  CPU2\n 36:  5  7  PCI-MSI  virtio1-req.0\n"
	got, err = irqCountsPerCPU(strings.NewReader(sparse), []int{36})
	if err != nil || got[0] != 5 || got[2] != 7 || got[1] != 0 {
		t.Fatalf("sparse columns: %v, %v", got, err)
	}
	if _, err := irqCountsPerCPU(strings.NewReader("garbage\n"), []int{36}); err == nil {
		t.Fatal("a header without CPU columns was accepted")
	}
}

// fakeSys builds a sysfs in which dir's block device sits under a PCI
// function with the given msi_irqs (none: a legacy irq file with legacy,
// if legacy > 0) and returns its root.
func fakeSys(t *testing.T, dir string, msi []int, legacy int) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	pci := filepath.Join(root, "devices", "pci0000:00", "0000:00:02.0")
	blk := filepath.Join(pci, "virtio1", "block", "vda")
	for _, d := range []string{blk, filepath.Join(pci, "msi_irqs"), filepath.Join(root, "dev", "block")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range msi {
		if err := os.WriteFile(filepath.Join(pci, "msi_irqs", fmt.Sprint(n)), []byte("msix\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if legacy > 0 {
		if err := os.WriteFile(filepath.Join(pci, "irq"), []byte(fmt.Sprintf("%d\n", legacy)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dev := uint64(st.Dev)
	link := filepath.Join(root, "dev", "block", fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev)))
	if err := os.Symlink("../../devices/pci0000:00/0000:00:02.0/virtio1/block/vda", link); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestDiskIRQCPU(t *testing.T) {
	data := t.TempDir()
	procInt := filepath.Join(t.TempDir(), "interrupts")
	if err := os.WriteFile(procInt, []byte(interruptsTwoCPUs), 0o644); err != nil {
		t.Fatal(err)
	}
	sys := fakeSys(t, data, []int{35, 36}, 0)
	d, ok, err := diskIRQCPU(sys, procInt, data, CPUSet{0, 1})
	if err != nil || !ok || d.CPU != 1 || d.Device != "vda" {
		t.Fatalf("diskIRQCPU = %+v, %v, %v; want vda on CPU1", d, ok, err)
	}
	// Only CPU0 allowed: it took none of the disk's interrupts, so there
	// is no answer (the caller keeps its first CPU).
	if d, ok, err := diskIRQCPU(sys, procInt, data, CPUSet{0}); err != nil || ok {
		t.Fatalf("CPU0 only: %+v, %v, %v; want no answer", d, ok, err)
	}
	// A device with a legacy interrupt line instead of MSI.
	sys = fakeSys(t, data, nil, 41)
	if d, ok, err := diskIRQCPU(sys, procInt, data, CPUSet{0, 1}); err != nil || !ok || d.CPU != 0 {
		t.Fatalf("legacy irq 41: %+v, %v, %v; want CPU0", d, ok, err)
	}
	// No interrupts anywhere above the block device (device-mapper, loop).
	sys = fakeSys(t, data, nil, 0)
	if d, ok, err := diskIRQCPU(sys, procInt, data, CPUSet{0, 1}); err != nil || ok {
		t.Fatalf("no interrupts: %+v, %v, %v; want no answer", d, ok, err)
	}
	// No block device behind the directory at all (tmpfs, overlay).
	if d, ok, err := diskIRQCPU(t.TempDir(), procInt, data, CPUSet{0, 1}); err != nil || ok {
		t.Fatalf("no block device: %+v, %v, %v; want no answer", d, ok, err)
	}
	if _, _, err := diskIRQCPU(sys, procInt, filepath.Join(data, "missing"), CPUSet{0, 1}); err == nil {
		t.Fatal("a data directory that does not exist gave no error")
	}
}
