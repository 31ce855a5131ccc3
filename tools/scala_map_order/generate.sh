#!/bin/sh
# Regenerate tests/data/scala-2.11-map-order.json from REAL Scala 2.11 collections (legacy-zk-protocol.md §4.3).
# Needs Debian's scala package (bookworm ships 2.11.12; never 2.12/2.13, whose collections differ):
#   apt-get update && apt-get install -y scala
# Usage: generate.sh                         golden vectors -> tests/data/scala-2.11-map-order.json
#        generate.sh bulk SEED COUNT OUT     many random cases (plus JSON.parseFull and duplicate-key checks)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
lib=$(readlink -f /usr/share/java/scala-library-2.11.jar)
json=$(readlink -f /usr/share/java/scala-parser-combinators_2.11.jar)
scalac -version 2>&1 | grep -q 'version 2\.1[01]\.' || { echo "scalac is not Scala 2.10/2.11" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
scalac -cp "$json" -d "$out" "$here/Generate.scala"
export SCALA_DEB_VERSION="$(dpkg-query -W -f='${Version}' scala-library)"
if [ $# -eq 0 ]; then
  set -- golden "$repo/tests/data/scala-2.11-map-order.json"
fi
java -cp "$out:$lib:$json" Generate "$@"
