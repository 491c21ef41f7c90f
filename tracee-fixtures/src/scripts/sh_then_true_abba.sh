#!/bin/sh
# sh_then_true_abba.sh — verdict: deadlock.
# The shell forks abba_O0 as a child process, waits for it, then goes on (`; true`
# hides its exit status). The ABBA deadlock is in the child: mcheck must follow the
# forked child through its exec and check it.
"${0%/*}/abba_O0" "$@"; true
