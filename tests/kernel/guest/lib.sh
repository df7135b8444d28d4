# Helpers for the guest scripts (sourced): t NAME CMD... runs one check.
pass=0; fail=0
t() {
  n=$1; shift
  if ( "$@" ) > /tmp/t.out 2>&1; then pass=$((pass+1)); echo "PASS $n"
  else fail=$((fail+1)); echo "FAIL $n: $(tail -3 /tmp/t.out | tr '\n' ' ')"; fi
}
summary() { echo "$pass passed, $fail failed"; [ $fail = 0 ]; }
