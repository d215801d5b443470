#!/bin/bash
# Generate a policy with N extra rules in front of the bundled policy's rules (for the scaling
# benchmark). The generated rules are shaped like a large site policy — one rule per service,
# tenant namespace or team: a literal label value (app=svc-I), a literal namespace (tenant-I),
# an annotation value (example.com/team=team-I), a label-or-annotation value
# (example.com/tier=tier-I), some with a kube_qos or kind condition too. None of them matches the
# benchmark's captured requests, so classification still ends at the bundled rules.
# With GLOB=1 every generated rule uses a glob value instead (app=svc-I-*), which the compiled
# rule index cannot narrow down by value (worst case: filed under the key only).
#
# Usage: bench/gen-policy.sh N BUNDLED_POLICY > policy.toml
set -euo pipefail
n=${1:?usage: gen-policy.sh N BUNDLED_POLICY}
bundled=${2:?usage: gen-policy.sh N BUNDLED_POLICY}
# The bundled file: everything before its first [[rules]] (version, settings), then the
# generated rules, then the rest (bundled rules and classes).
first=$(grep -n '^\[\[rules\]\]' "$bundled" | head -1 | cut -d: -f1)
head -n $((first - 1)) "$bundled"
echo "# ---- $n generated rules (bench/gen-policy.sh) ----"
# The classes the generated rules point at: the bundled file's own (its class names change with
# the policy; a rule naming an unknown class is an error).
classes=$(sed -n 's/^\[classes\.\([A-Za-z0-9_-]*\)\][[:space:]]*$/\1/p' "$bundled" | tr '\n' ' ')
awk -v n="$n" -v glob="${GLOB:-0}" -v classes="$classes" 'BEGIN {
  nc = split(classes, cls, " ");
  for (i = 1; i <= n; i++) {
    c = cls[(i % nc) + 1];
    printf "[[rules]]\nname = \"gen-%d\"\nclass = \"%s\"\n", i, c;
    k = i % 4;
    if (glob) printf "match.labels = { \"app\" = \"svc-%d-*\" }\n", i;
    else if (k == 0) printf "match.labels = { \"app\" = \"svc-%d\" }\n", i;
    else if (k == 1) printf "match.namespace = [\"tenant-%d\", \"tenant-%d-staging\"]\n", i, i;
    else if (k == 2) printf "match.annotations = { \"example.com/team\" = \"team-%d\" }\n", i;
    else printf "match.labels_or_annotations = { \"example.com/tier\" = \"tier-%d\" }\n", i;
    if (i % 7 == 0) printf "match.kube_qos = \"burstable\"\n";
    if (i % 11 == 0) printf "match.kind = \"container\"\n";
    printf "\n";
  }
}'
tail -n +"$first" "$bundled"
