#!/bin/sh
# The logic of the ybs GitHub Action (action.yml), one phase per step:
#
#   run.sh resolve   which ybs to use: `ybs-binary:`, an installed `ybs`, or
#                    a release download (version, target, cache directory)
#   run.sh install   download the release binary for this runner and check
#                    it against the release's SHA256SUMS
#   run.sh sandbox   on Linux, when `ybs sandbox check` finds user namespaces
#                    refused because AppArmor restricts them and sudo needs no
#                    password (GitHub's ubuntu-24.04 runners): install ybs
#                    root-owned and load a narrow AppArmor profile for that
#                    path alone (docs/sandbox.md, "AppArmor"); never turns
#                    the restriction off machine-wide
#   run.sh run       `ybs run`, which writes the job outputs (from
#                    OUT/junit.xml here when ybs stopped before running)
#   run.sh finish    exit with ybs's exit code (after the artifact upload)
#
# Inputs arrive as INPUT_* variables set by action.yml; outputs go to
# $GITHUB_OUTPUT as `name=value` lines. POSIX sh, so a test can run it.
set -u

die() {
    echo "::error title=ybs action::$1" >&2
    [ $# -lt 2 ] || echo "  hint: $2" >&2
    exit 2
}

output() {
    case $2 in
        *'
'*) die "output $1 would hold a line break: $2" ;;
    esac
    if [ -n "${GITHUB_OUTPUT-}" ]; then
        printf '%s=%s\n' "$1" "$2" >> "$GITHUB_OUTPUT"
    else
        printf '%s=%s\n' "$1" "$2"
    fi
}

# The release target for this runner: RUNNER_OS/RUNNER_ARCH, else uname.
target() {
    os=${RUNNER_OS:-$(uname -s)}
    arch=${RUNNER_ARCH:-$(uname -m)}
    case $os in
        Linux) os=unknown-linux-musl ;;
        macOS | Darwin) os=apple-darwin ;;
        *) die "no ybs release binary for $os" "use a Linux or macOS runner, or build ybs and pass ybs-binary:" ;;
    esac
    case $arch in
        X64 | x86_64 | amd64) arch=x86_64 ;;
        ARM64 | aarch64 | arm64) arch=aarch64 ;;
        *) die "no ybs release binary for $arch" "pass ybs-binary: with a ybs built for this runner" ;;
    esac
    echo "$arch-$os"
}

# owner/name of the repository the action (and its releases) come from.
repository() {
    if [ -n "${YBS_ACTION_REPOSITORY-}" ]; then
        echo "$YBS_ACTION_REPOSITORY"
        return
    fi
    # .../_actions/OWNER/NAME/REF when the runner fetched the action.
    case ${GITHUB_ACTION_PATH-} in
        */_actions/*/*/*)
            rest=${GITHUB_ACTION_PATH#*/_actions/}
            owner=${rest%%/*}
            rest=${rest#*/}
            echo "$owner/${rest%%/*}"
            ;;
        *) echo "${GITHUB_REPOSITORY-}" ;;
    esac
}

# The ref the action was used at (`uses: owner/ybs@v0.2.0` gives v0.2.0).
action_ref() {
    if [ -n "${YBS_ACTION_REF-}" ]; then
        echo "$YBS_ACTION_REF"
        return
    fi
    case ${GITHUB_ACTION_PATH-} in
        */_actions/*/*/*) basename "$GITHUB_ACTION_PATH" ;;
    esac
}

fetch() { # URL FILE
    if command -v curl > /dev/null 2>&1; then
        curl --fail --silent --show-error --location --retry 3 --output "$2" "$1"
    elif command -v wget > /dev/null 2>&1; then
        wget --quiet --tries=3 --output-document="$2" "$1"
    else
        die "neither curl nor wget is installed" "install one, or pass ybs-binary:"
    fi
}

sha256() {
    if command -v sha256sum > /dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        shasum -a 256 "$1" | cut -d' ' -f1
    fi
}

resolve() {
    binary=${INPUT_YBS_BINARY-}
    version=${INPUT_VERSION-}
    if [ -n "$binary" ]; then
        [ -f "$binary" ] && [ -x "$binary" ] ||
            die "ybs-binary: $binary is not an executable file" "give the path of a built ybs, e.g. target/release/ybs"
        output download false
        output binary "$binary"
        return
    fi
    if [ -z "$version" ] && installed=$(command -v ybs 2> /dev/null) && [ -n "$installed" ]; then
        output download false
        output binary "$installed"
        return
    fi
    if [ -z "$version" ]; then
        version=$(action_ref)
        case $version in
            v[0-9]*) ;;
            *) die "the action's ref \`${version:-(none)}\` is not a release tag, and no ybs is installed" \
                "use the action at a version tag (owner/ybs@v0.2.0), or set version: (a tag or latest) or ybs-binary:" ;;
        esac
    fi
    repo=$(repository)
    [ -n "$repo" ] || die "cannot tell which repository to download ybs from" "set ybs-binary:"
    if [ "$version" = latest ]; then
        url=$(curl --fail --silent --show-error --location --output /dev/null \
            --write-out '%{url_effective}' "https://github.com/$repo/releases/latest") ||
            die "cannot find the latest release of $repo" "set version: to a tag"
        version=${url##*/}
    fi
    case $version in
        */* | *' '* | '') die "version: \`$version\` is not a release tag" "e.g. v0.2.0" ;;
    esac
    target=$(target) || exit 2
    dir=${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}}/ybs/$version/$target
    output download true
    output version "$version"
    output target "$target"
    output repository "$repo"
    output dir "$dir"
    output binary "$dir/ybs"
    # Later steps of the job find the installed ybs on PATH.
    [ -z "${GITHUB_PATH-}" ] || echo "$dir" >> "$GITHUB_PATH"
}

install_release() {
    version=${YBS_VERSION:?} target=${YBS_TARGET:?} dir=${YBS_DIR:?} repo=${YBS_REPOSITORY:?}
    base=${YBS_DOWNLOAD_URL:-https://github.com/$repo/releases/download}
    asset=ybs-$target
    scratch=$(mktemp -d) || die "cannot make a temporary directory"
    trap 'rm -rf "$scratch"' EXIT
    fetch "$base/$version/SHA256SUMS" "$scratch/SHA256SUMS" ||
        die "cannot download SHA256SUMS of ybs $version from $base" "is $version a release of $repo?"
    fetch "$base/$version/$asset" "$scratch/$asset" ||
        die "cannot download $asset of ybs $version from $base" "the release may have no binary for $target"
    expected=$(awk -v asset="$asset" '$2 == asset || $2 == "*" asset { print $1; exit }' "$scratch/SHA256SUMS")
    [ -n "$expected" ] || die "SHA256SUMS of ybs $version has no line for $asset"
    actual=$(sha256 "$scratch/$asset")
    [ "$actual" = "$expected" ] ||
        die "checksum mismatch for $asset of ybs $version: expected $expected, got $actual" "the download is corrupt or was tampered with; nothing was installed"
    if ! { mkdir -p "$dir" && mv "$scratch/$asset" "$dir/ybs" && chmod +x "$dir/ybs"; }; then
        die "cannot install ybs into $dir"
    fi
    echo "ybs $version ($target) installed in $dir, sha256 $actual"
}

# Where the sandbox phase installs ybs and its AppArmor profile.
# YBS_SANDBOX_ROOT prefixes both for the tests (tests/suite/pipeline.rs);
# the profile always names the real path.
AA_BINARY=/usr/local/lib/ybs/ybs
AA_PROFILE=/etc/apparmor.d/ybs

sandbox() {
    binary=${YBS_BINARY:?}
    root=${YBS_SANDBOX_ROOT-}
    [ "$(uname -s)" = Linux ] || { output binary "$binary"; return; }
    check=$("$binary" sandbox check --json 2> /dev/null)
    code=$?
    # 0: every layer works; anything but 4: a ybs without `sandbox check`.
    if [ "$code" != 4 ]; then
        output binary "$binary"
        return
    fi
    case $check in
        *'{"layer":"namespaces","ok":false'*) ;;
        *)
            echo "ybs: the sandbox lacks a layer other than namespaces; \`ybs sandbox check\` says why"
            output binary "$binary"
            return
            ;;
    esac
    restrict=$(sysctl -n kernel.apparmor_restrict_unprivileged_userns 2> /dev/null)
    if [ "$restrict" != 1 ]; then
        echo "ybs: user namespaces are refused, and not by AppArmor; \`ybs sandbox check\` says why"
        output binary "$binary"
        return
    fi
    if ! sudo -n true > /dev/null 2>&1; then
        echo "::warning title=ybs action::AppArmor restricts unprivileged user namespaces here (kernel.apparmor_restrict_unprivileged_userns=1) and sudo needs a password; \`ybs sandbox check\` prints the fix"
        output binary "$binary"
        return
    fi
    echo "ybs: AppArmor restricts unprivileged user namespaces here (kernel.apparmor_restrict_unprivileged_userns=1)"
    # Root-owned and writable by root alone: AppArmor attaches the profile
    # by path, and a path the runner user could write would hand userns to
    # whatever is copied there.
    sudo -n install -D -o root -g root -m 0755 "$binary" "$root$AA_BINARY" ||
        die "cannot install ybs at $AA_BINARY"
    printf '%s\n' 'abi <abi/4.0>,' 'include <tunables/global>' '' \
        "profile ybs $AA_BINARY flags=(unconfined) {" '  userns,' '' \
        '  include if exists <local/ybs>' '}' |
        sudo -n tee "$root$AA_PROFILE" > /dev/null ||
        die "cannot write the AppArmor profile $AA_PROFILE"
    sudo -n apparmor_parser -r "$root$AA_PROFILE" ||
        die "apparmor_parser cannot load $AA_PROFILE"
    echo "ybs: installed ybs root-owned at $AA_BINARY and loaded the AppArmor profile $AA_PROFILE, which lets that path alone make user namespaces; the restriction stays on for everything else"
    output binary "$root$AA_BINARY"
    [ -z "${GITHUB_PATH-}" ] || echo "$root${AA_BINARY%/*}" >> "$GITHUB_PATH"
    if "$root$AA_BINARY" sandbox check; then
        echo "ybs: the sandbox works now"
    else
        echo "::warning title=ybs action::the sandbox still lacks a layer after loading the AppArmor profile; tasks that run programs will refuse to start"
    fi
}

# ybs's exit code as a word for the `status` output.
status_of() {
    case $1 in
        0) echo passed ;;
        1) echo failed ;;
        2) echo invalid ;;
        3) echo paused ;;
        4) echo error ;;
        130) echo interrupted ;;
        *) echo error ;;
    esac
}

count() { # STATUS JUNIT: testcases whose status property is STATUS
    if [ -n "$2" ] && [ -f "$2" ]; then
        grep -c "<property name=\"status\" value=\"$1\"/>" "$2"
    else
        echo 0
    fi
}

run() {
    binary=${YBS_BINARY:?}
    out=${INPUT_OUT:-ybs-out}
    junit=$out/junit.xml
    # Words, not shell code: split on blanks, no globbing, no expansion.
    set -f
    # shellcheck disable=SC2086
    set -- ${INPUT_ARGS-}
    previous=
    for word in "$@"; do
        case $previous/$word in
            --junit/*) junit=$word ;;
            */--junit=*) junit=${word#--junit=} ;;
            */--out | */--out=*) die "args: pass the output directory as the out: input, not --out" ;;
        esac
        previous=$word
    done
    [ -n "${INPUT_PROVIDER-}" ] && set -- --provider "$INPUT_PROVIDER" "$@"
    [ -n "${INPUT_MODEL-}" ] && set -- --model "$INPUT_MODEL" "$@"
    # shellcheck disable=SC2086
    set -- run --out "$out" "$@" ${INPUT_TASKS:-tasks/}
    set +f
    # What this step writes is newer than this mark: a junit.xml left by
    # an earlier step or run counts for nothing.
    mark=$(mktemp "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/ybs-step.XXXXXX") || mark=
    echo "+ $binary $*"
    "$binary" "$@"
    code=$?
    if [ -z "$mark" ] || [ -z "$(find "$junit" -newer "$mark" 2> /dev/null)" ]; then
        junit=
    fi
    if [ -n "$mark" ]; then rm -f "$mark"; fi
    output exit-code "$code"
    # ybs writes status, passed, failed, errors, paused, skipped, junit, summary,
    # out and output to $GITHUB_OUTPUT itself once tasks ran; when it stopped before
    # (invalid inputs: exit 2), they come from here.
    if [ -n "${GITHUB_OUTPUT-}" ] && grep -q '^status[=<]' "$GITHUB_OUTPUT" 2> /dev/null; then
        echo "ybs: exit $code"
    else
        status=$(status_of "$code")
        passed=$(count passed "$junit")
        failed=$(count failed "$junit")
        errors=$(count error "$junit")
        paused=$(count paused "$junit")
        skipped=$(count skipped "$junit")
        output status "$status"
        output passed "$passed"
        output failed "$failed"
        output errors "$errors"
        output paused "$paused"
        output skipped "$skipped"
        output out "$out"
        output junit "$junit"
        output summary "$out/summary.md"
        output output ""
        echo "ybs: $status (exit $code): $passed passed, $failed failed, $errors errors, $paused paused"
    fi
    # The page people open first (docs/ci.md): named in the step summary,
    # with where to find it.
    if [ -f "$out/report.html" ] && [ -n "${GITHUB_STEP_SUMMARY-}" ]; then
        if [ "${INPUT_UPLOAD_ARTIFACT-}" = true ]; then
            printf '%s\n' "**ybs**: the HTML report is \`report.html\` in the artifact \`${INPUT_ARTIFACT_NAME:-ybs-out}\`: download it, unzip it, open \`report.html\` in a browser (it needs no network)." >> "$GITHUB_STEP_SUMMARY"
        else
            printf '%s\n' "**ybs**: the HTML report is \`$out/report.html\` on the runner; set \`upload-artifact: true\` to keep it as an artifact." >> "$GITHUB_STEP_SUMMARY"
        fi
    fi
    if [ "$code" = 2 ] && [ -n "${GITHUB_STEP_SUMMARY-}" ]; then
        printf '%s\n' "**ybs**: the task files, config or arguments are invalid (exit 2); nothing ran. The log has the errors." >> "$GITHUB_STEP_SUMMARY"
    fi
}

case ${1-} in
    resolve) resolve ;;
    install) install_release ;;
    sandbox) sandbox ;;
    run) run ;;
    finish) exit "${YBS_EXIT_CODE:-2}" ;;
    *) die "usage: run.sh resolve|install|sandbox|run|finish" ;;
esac
