package wan

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// tunName is the name of each region's link to the WAN.
const tunName = "wan0"

// openTUN makes a TUN device (IP packets, no packet-information header) in the calling
// thread's network namespace. It lives while the returned file is open. Its descriptor is
// non-blocking, so reads wait in the runtime's poller and Close ends them.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("make TUN device %s: %w", name, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "tun "+name), nil
}
