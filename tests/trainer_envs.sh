#!/usr/bin/env bash
# Each trainer's plug-in tests, in its own virtual environment built from the
# install line its docs give (docs/verl.md, docs/trl.md, docs/skyrl.md): verl
# with the TRL its engine pins (at 0.9.x, and at 0.8.0, which rLLM pins), TRL alone at both ends of its pin, and SkyRL on
# Python 3.12, and OpenRLHF (docs/openrlhf.md) less its CUDA-only flash-attn.
# No other --no-deps: each resolution is the trainer's own.
# In each, tests/test_light_install.py checks that the trainer's extra brought
# the light core only: no cvxpy, clarabel or matplotlib, and nothing beyond
# torch, numpy and numba loaded by import bandsolve.torch; and (verl, trl,
# skyrl, openrlhf) tests/test_doctor_advice.py runs every pip command
# bandsolve doctor prints there as pip install --dry-run (PyPI needed) and
# checks that the trainer's pins still hold; tests/test_cuda_plugins.py skips
# there (no GPU) and runs on a lent one (benchmarks/device/plugins.sh).
#
#   bash tests/trainer_envs.sh [verl] [verl-0.8] [trl-lowest] [trl] [skyrl] [openrlhf]   (default: all)
#
# The environments live in .trainer-envs/ (git-ignored) and are reused when
# their install line has not changed; pip's cache is shared between them.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
ENVS="$ROOT/.trainer-envs"
mkdir -p "$ENVS"

# This machine kind ships a CPU build of torch 2.13.0: pinning it keeps pip
# from downloading a CUDA build for every environment.
TORCH="torch==2.13.0"

python312() {
    # pyenv ships python3.12 as a shim that needs a version selected; find the
    # interpreter itself
    local candidate
    for candidate in "$(command -v python3.12 2>/dev/null || true)" \
                     "$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 2>/dev/null | tail -1)"; do
        if [ -n "$candidate" ] && "$candidate" -c "" 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
    echo "SkyRL needs Python 3.12 (python3.12 not found)" >&2
    return 1
}

# make_env NAME PYTHON INSTALL-ARGS...: a venv with exactly these requirements
make_env() {
    local name="$1" python="$2"
    shift 2
    local venv="$ENVS/$name" stamp="$*"
    if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.install-line" 2>/dev/null)" != "$stamp" ] \
            || [ -n "${CI:-}" ]; then
        rm -rf "$venv"
        "$python" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --upgrade pip
        echo "[$name] pip install $*"
        "$venv/bin/python" -m pip install --quiet "$@"
        "$venv/bin/python" -m pip check
        echo "$stamp" > "$venv/.install-line"
    fi
}

# OpenRLHF requires flash-attn==2.8.3, whose build needs CUDA: its documented
# line (pip install openrlhf) cannot install on a machine without it. The
# environment is that install less flash-attn: openrlhf without dependencies,
# then every requirement its metadata declares except flash-attn, at
# OpenRLHF's own pins (deepspeed 0.19.6, transformers 5.15.0, ray[default]
# 2.55.0, ...), with bandsolve. pip check may report that one absence, no other.
OPENRLHF="openrlhf==0.11.2"
make_openrlhf_env() {
    local name="$1" python="$2" venv="$ENVS/$1"
    shift 2
    local stamp="$OPENRLHF $*"
    if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.install-line" 2>/dev/null)" != "$stamp" ] \
            || [ -n "${CI:-}" ]; then
        rm -rf "$venv"
        "$python" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --upgrade pip
        "$venv/bin/python" -m pip install --quiet --no-deps "$OPENRLHF"
        local requirements
        requirements="$("$venv/bin/python" -c '
import importlib.metadata as md, re
for line in md.requires("openrlhf"):
    name = re.split(r"[ ;<>=!~\[(]", line.strip(), maxsplit=1)[0]
    if "extra ==" not in line and name.lower() != "flash-attn":
        print(line.split(";")[0].strip())')"
        echo "[$name] pip install --no-deps $OPENRLHF; pip install $* <openrlhf's requirements but flash-attn>"
        # shellcheck disable=SC2086  # one requirement a line, none with spaces
        "$venv/bin/python" -m pip install --quiet "$@" $requirements
        local problems
        problems="$("$venv/bin/python" -m pip check 2>&1 | grep -v 'requires flash-attn, which is not installed' || true)"
        if [ -n "$problems" ] && [ "$problems" != "No broken requirements found." ]; then
            echo "$problems" >&2
            return 1
        fi
        echo "$stamp" > "$venv/.install-line"
    fi
}

run_tests() {
    local name="$1"
    shift
    echo "[$name] $("$ENVS/$name/bin/python" -m pip list 2>/dev/null \
        | grep -Ei '^(verl|trl|transformers|skyrl|openrlhf|deepspeed|ray|torch) ' | tr -s ' ' | tr '\n' ';')"
    # -n 0: one process, as these tests were measured (a trainer's imports
    # dominate, and each worker would pay them again)
    "$ENVS/$name/bin/python" -m pytest -q -p no:cacheprovider -n 0 -m trainers "$@"
}

targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(verl verl-0.8 trl-lowest trl skyrl openrlhf)

# install_line NAME: sets BUILD to the function that builds NAME's environment
# and LINE to its python and pip arguments
install_line() {
    BUILD=make_env
    case "$1" in
        verl) LINE=(python3 "$TORCH" "$ROOT[test,verl]") ;;
        # rLLM pins verl==0.8.0
        verl-0.8) LINE=(python3 "$TORCH" "$ROOT[test,verl]" "verl==0.8.0") ;;
        trl-lowest) LINE=(python3 "$TORCH" "$ROOT[test,trl]" "trl==1.0.0") ;;
        trl) LINE=(python3 "$TORCH" "$ROOT[test,trl]") ;;
        skyrl) local python; python="$(python312)" || return 1
               LINE=("$python" "$TORCH" "$ROOT[test,skyrl]") ;;
        openrlhf) BUILD=make_openrlhf_env; LINE=(python3 "$TORCH" "$ROOT[test,torch]") ;;
        *) echo "unknown trainer environment: $1 (verl, verl-0.8, trl-lowest, trl, skyrl, openrlhf)" >&2
           return 2 ;;
    esac
}

# The environments are built side by side (their downloads overlap; each
# build's log goes to .trainer-envs/NAME.log and is shown if it fails), then
# tested one after the other, so that each test's timing has the cores.
declare -A builds
for target in "${targets[@]}"; do
    install_line "$target" || exit 2
    "$BUILD" "$target" "${LINE[@]}" > "$ENVS/$target.log" 2>&1 &
    builds[$target]=$!
done
for target in "${targets[@]}"; do
    if ! wait "${builds[$target]}"; then
        echo "[$target] the environment did not build:" >&2
        cat "$ENVS/$target.log" >&2
        exit 1
    fi
    cat "$ENVS/$target.log"
done

for target in "${targets[@]}"; do
    case "$target" in
        verl)
            run_tests verl tests/test_trainers_verl.py tests/test_trainers_verl_actor.py \
                tests/test_trainers_verl_registration.py tests/test_doctor.py tests/test_light_install.py \
                tests/test_examples.py tests/test_torch_trainer_edges.py tests/test_doctor_advice.py \
                tests/test_cuda_plugins.py ;;
        verl-0.8)
            # verl 0.8 loads no verl.plugins entry points: the plug-in comes in
            # through VERL_USE_EXTERNAL_MODULES, set as docs/verl.md tells rLLM
            # users to set it
            VERL_USE_EXTERNAL_MODULES=bandsolve.integrations.verl run_tests verl-0.8 \
                tests/test_trainers_verl.py tests/test_trainers_verl_registration.py \
                tests/test_doctor.py tests/test_light_install.py ;;
        trl-lowest)
            run_tests trl-lowest tests/test_trainers_trl.py tests/test_examples.py tests/test_light_install.py \
                tests/test_doc_snippets.py ;;
        trl)
            run_tests trl tests/test_trainers_trl.py tests/test_doctor.py tests/test_examples.py \
                tests/test_light_install.py tests/test_doctor_advice.py tests/test_cuda_plugins.py \
                tests/test_doc_snippets.py ;;
        skyrl)
            run_tests skyrl tests/test_trainers_skyrl.py tests/test_doctor.py tests/test_examples.py \
                tests/test_light_install.py tests/test_doctor_advice.py tests/test_cuda_plugins.py ;;
        openrlhf)
            run_tests openrlhf tests/test_trainers_openrlhf.py tests/test_doctor.py tests/test_examples.py \
                tests/test_light_install.py tests/test_doctor_advice.py tests/test_cuda_plugins.py \
                tests/test_doc_snippets.py ;;
    esac
done
