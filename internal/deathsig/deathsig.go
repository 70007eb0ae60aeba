// Package deathsig starts processes that die with the process that started
// them, where the system can tell them to (Linux): a program killed without a
// chance to stop its children (SIGKILL, a crash, a test binary's timeout)
// leaves none of them running unwatched.
package deathsig
