#!/bin/sh
# watchdog.sh SECONDS 'COMMAND LINE': runs the command line (through sh, so that it may be e.g.
# "cd DIR && gratingsim …"); if it still runs after SECONDS, prints the
# processes under it with where each thread waits (gdb's backtraces where gdb may attach, else the
# kernel's wait channel), ends them (TERM, then KILL) and exits 124, as coreutils' timeout does.
# Otherwise it exits with the command line's status (128 + n where signal n ended it).
#
# Why: a launch that hangs (Open MPI 4.1 is known to hang now and then in MPI_Finalize or at start-up
# in containers, e.g. open-mpi/ompi#10117; or a deadlock of our own) would otherwise hold the test,
# and CI with it, until CI's time is up, and print nothing about where it hung.
limit=$1
sh -c "$2" &
child=$!

descendants() {  # the processes under $1, depth first
  for p in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    echo "$p"
    descendants "$p"
  done
}

(
  # The sleep writes nowhere: were it left behind, it must not hold the caller's pipe open.
  sleep "$limit" < /dev/null > /dev/null 2>&1 &
  sleeper=$!
  trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
  wait "$sleeper"
  kill -0 "$child" 2>/dev/null || exit 0
  trap '' TERM  # from here on it reports, and its status says so
  all="$child $(descendants "$child")"
  echo "watchdog.sh: still running after $limit s: $2"
  ps -o pid,ppid,stat,etime,args -p "$(echo $all | tr ' ' ',')"
  for p in $all; do
    echo "--- process $p: $(tr '\0' ' ' < /proc/"$p"/cmdline 2>/dev/null)"
    if command -v gdb > /dev/null 2>&1 &&
       gdb -p "$p" -batch -nx -ex "thread apply all bt 25" 2>/dev/null | grep -E '^(Thread|#)'; then
      continue
    fi
    for t in /proc/"$p"/task/*; do
      echo "thread ${t##*/}: waits in $(cat "$t"/wchan 2>/dev/null)"
    done
  done
  kill -TERM $all 2>/dev/null
  for second in 1 2 3 4 5 6 7 8 9 10; do  # up to 10 s to end, then KILL
    kill -0 $all 2>/dev/null || break
    sleep 1
  done
  kill -KILL $all 2>/dev/null
  exit 124
) &
watcher=$!

wait "$child"
status=$?
kill "$watcher" 2>/dev/null
wait "$watcher"
[ $? -eq 124 ] && exit 124
exit "$status"
