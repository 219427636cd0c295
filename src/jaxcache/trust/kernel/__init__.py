"""The kernel's view of a path: fd walks, mounts, block devices in sysfs, overlay layers, ACLs,
principals and their write access, the process table and the handles processes hold."""
