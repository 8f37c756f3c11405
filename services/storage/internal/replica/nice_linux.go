package replica

import "syscall"

// lowerThreadPriority sets the nice value of the calling OS thread (Linux
// applies setpriority to one thread when given its id). The caller has
// locked its goroutine to the thread.
func lowerThreadPriority(nice int) error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice)
}

// threadNice returns the calling OS thread's nice value.
func threadNice() (int, error) {
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	return 20 - p, err // the raw system call answers 20 - nice
}
