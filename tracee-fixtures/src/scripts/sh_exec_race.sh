#!/bin/sh
# sh_exec_race.sh — verdict: data_race.
# A wrapper script, as programs are often started: the shell replaces itself with
# race_counter (exec), whose two threads race on `counter`. mcheck must check the
# program after exec, not the shell alone (and take the script given directly).
exec "${0%/*}/race_counter" "$@"
