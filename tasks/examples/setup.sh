#!/bin/sh
# setup.sh DIR: makes DIR a scratch git repository of the fixture project
# (textkit, under fixture/) with a little history, for the example tasks:
#
#   sh tasks/examples/setup.sh target/ybs-examples
#   ybs run tasks/examples tasks/refactor.yaml            # replays offline
#
# History: `chore: textkit 0.1.0` (tagged v0.1.0), then `feat: add repeat()`
# and `feat: add words()`, which the changelog example writes up.
set -eu
dir=${1:?usage: setup.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
    echo "setup.sh: $dir exists and is not empty" >&2
    exit 2
fi
mkdir -p "$dir"
cp -R "$here/fixture/." "$dir/"
cd "$dir"
git() {
    command git -c user.name=textkit -c user.email=textkit@example.invalid \
        -c init.defaultBranch=main -c commit.gpgsign=false -c tag.gpgsign=false "$@"
}
git init -q
hold=$(mktemp -d)
mv lib/repeat.sh lib/words.sh tests/test_words.sh "$hold"/
git add -A
git commit -q -m "chore: textkit 0.1.0"
git tag v0.1.0
mv "$hold"/repeat.sh lib/
git add -A
git commit -q -m "feat: add repeat()"
mv "$hold"/words.sh lib/
mv "$hold"/test_words.sh tests/
git add -A
git commit -q -m "feat: add words()"
rmdir "$hold"
