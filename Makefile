# Capacity Orchestrator: every target does its own setup on a fresh machine.
# Python 3.13 is the Lambda runtime; we build and test with it.
SHELL := /bin/bash
PY313 ?= $(shell PYENV_VERSION=3.13.0 pyenv which python3.13 2>/dev/null || command -v python3.13)
VENV := .venv
BIN := $(VENV)/bin
SAM_VENV := .tools/sam
SAM := $(SAM_VENV)/bin/sam
SAM_CLI_VERSION := 1.170.0
# checkov pins boto3 1.35 and an older pytest: it gets its own venv, like SAM CLI (docs/security.md).
CHECKOV_VENV := .tools/checkov
# Through the venv's python, not its bin/checkov script: a script's shebang pins the path the venv was made at.
CHECKOV := $(CHECKOV_VENV)/bin/python -m checkov.main
CHECKOV_VERSION := 3.3.30
# sam build looks for python3.13 on PATH: the project venv provides it.
export PATH := $(CURDIR)/$(BIN):$(PATH)
export SAM_CLI_TELEMETRY := 0
export AWS_DEFAULT_REGION ?= us-east-1

.PHONY: asl asl-validate seed-policy demo demo-ec2 demo-extend test lint typecheck template build unit unit-future coverage-branches venv sam clean serve openapi catalog soak security checkov bench costs-measure deploy smoke remove record-calls deploy-check

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	@test -n "$(PY313)" || { echo "python3.13 not found (try: pyenv install 3.13.0)"; exit 1; }
	@echo ">> Creating $(VENV) with $(PY313) and installing the pinned dependencies (first run only: a few minutes)"
	@test -x $(BIN)/python || $(PY313) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@

sam: $(SAM_VENV)/.installed
$(SAM_VENV)/.installed:
	@echo ">> Installing AWS SAM CLI $(SAM_CLI_VERSION) into $(SAM_VENV) (first run only)"
	@test -x $(SAM_VENV)/bin/python || $(PY313) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet --disable-pip-version-check aws-sam-cli==$(SAM_CLI_VERSION)
	@touch $@

checkov: $(CHECKOV_VENV)/.installed
$(CHECKOV_VENV)/.installed:
	@echo ">> Installing checkov $(CHECKOV_VERSION) into $(CHECKOV_VENV) (first run only)"
	@test -x $(CHECKOV_VENV)/bin/python || $(PY313) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --disable-pip-version-check checkov==$(CHECKOV_VERSION)
	@touch $@

## The main job: a real POST /reservations through the local cloud, printed as a timeline, with the seed's
## two-model traffic replayed on the endpoint (reports/demo.json and reports/demo.png: reserved capacity against
## what ran, purchases and releases marked, and the traffic; each demo writes its own). It is never cut short for being
## slow: a hang detector ends it only after --stall-seconds (default 600) of real time without progress;
## DEMO_ARGS passes options to `python -m localcloud run`, e.g. make demo DEMO_ARGS='--stall-seconds 1200'.
DEMO_ARGS ?=
demo: venv
	$(BIN)/python -m localcloud run events/api_post_reservation.json --traffic events/traffic_two_models.json \
		--report-name demo $(DEMO_ARGS)

## The EC2 path: a launch template, then a POST /reservations for an EC2 Capacity Block (platform ec2);
## reports/demo-ec2.png: the block's instances against what ran.
demo-ec2: venv
	$(BIN)/python -m localcloud run events/ec2_create_launch_template.json events/api_post_reservation_ec2.json \
		--report-name demo-ec2 $(DEMO_ARGS)

## Keep serving (issue 17): a request with serve_until whose training plan is extended once in place, then,
## when nothing more can be extended in its region, rolled over to a plan in another region; the traffic
## replay follows the endpoint parameter across the switch (events/market_serve_until.json: the market).
demo-extend: venv
	$(BIN)/python -m localcloud run events/api_post_reservation_serve_until.json \
		--market events/market_serve_until.json --traffic events/traffic_two_models.json \
		--report-name demo-extend $(DEMO_ARGS)

## A local HTTP API on 127.0.0.1:$(PORT) (like `sam local start-api`, without Docker). SPEED is virtual
## seconds per real second: 3600 makes a week-ahead reservation go Active in under 3 minutes. Virtual time
## starts at the sample events' time (2026-11-29T12:00Z) when the first request arrives, so the samples'
## dates work on any day (START=now: the real time). SETUP: events delivered first (the models Slack's
## /gpu reserve names must exist, as on AWS). PORT: LOCALCLOUD_PORT, else 3000.
SPEED ?= 3600
PORT ?= $(or $(LOCALCLOUD_PORT),3000)
START ?=
SETUP ?= events/sagemaker_create_model_llama_eu.json events/sagemaker_create_model_llama_us.json
serve: venv
	$(BIN)/python -m localcloud serve --speed $(SPEED) --port $(PORT) $(if $(START),--start $(START)) \
		$(foreach event,$(SETUP),--setup $(event))

## Load deploy/policy-seed.json (teams, budgets, approvers, the account cap) into the deployed PolicyTable.
seed-policy: deploy-check
	@$(MAKE) --no-print-directory venv
	$(BIN)/python scripts/seed_policy.py --stack $(STACK)

## tests/gates/recorded_calls.json: the AWS calls the integration tests make, with the checks IAM evaluated
## (each action and its dependent actions), replayed against the template by tests/gates/test_dependent_actions.py.
record-calls: venv
	rm -f .recorded-calls.jsonl
	LOCALCLOUD_RECORD_CHECKS=$(CURDIR)/.recorded-calls.jsonl $(BIN)/pytest -q -p no:cacheprovider -n 2 tests/integration
	$(BIN)/python scripts/record_calls.py .recorded-calls.jsonl tests/gates/recorded_calls.json

## statemachines/*.asl.json, written from their specs (statemachines/<name>.py; docs/architecture.md, "Workflows
## from a spec"); tests/gates/test_workflow_specs.py fails when a committed file is not what its spec writes.
asl: venv
	$(BIN)/python -m statemachines

## The Amazon States Language validator (npm's asl-validator, through npx: needs node and the npm registry; not
## part of make test, whose gate checks the files against their specs).
ASL_VALIDATOR_VERSION := 4.0.0
asl-validate:
	npx --yes asl-validator@$(ASL_VALIDATOR_VERSION) $(foreach file,$(wildcard statemachines/*.asl.json),--json-path $(file))

## docs/openapi.json, generated from functions/api (Powertools); a unit test fails when it drifts.
openapi: venv
	$(BIN)/python scripts/export_openapi.py

## capacity_cli/catalog.json: the values the CLI completes (instance types, regions, states...), exported from
## the layer's tables; tests/cli/test_cli_completion.py fails when it drifts.
catalog: venv
	$(BIN)/python scripts/export_catalog.py

## The fault soak: COUNT randomized lifecycles with injected faults, checked for the money rules (docs/soak.md).
## Prints the counts; exits 1 and names the seed on any violation. ONLY=i re-runs lifecycle i alone. Then the
## 20-lifecycle soak test (make test runs a short one of 4).
SEED ?= 1
COUNT ?= 200
WORKERS ?= 2
soak: venv
	$(BIN)/python -m localcloud soak --seed $(SEED) --count $(COUNT) --workers $(WORKERS) $(if $(ONLY),--only $(ONLY) --timeline)
	$(if $(ONLY),,LOCALCLOUD_LONG_SOAK=1 $(BIN)/pytest -q -p no:cacheprovider tests/soak/test_soak.py -k twenty)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=.:layers/capacity $(BIN)/lint-imports --no-cache

typecheck: venv
	$(BIN)/mypy

template: venv sam
	@echo ">> cfn-lint, sam validate --lint, sam build"
	$(BIN)/cfn-lint template.yaml
	$(SAM) validate --lint --template template.yaml --region $(AWS_DEFAULT_REGION)
	@$(MAKE) --no-print-directory build

## sam build into .aws-sam/build, what make deploy uploads (the layer by layers/capacity/Makefile: the pinned
## arm64 wheels and the capacity package, compiled); make bench imports the functions from there.
build: venv sam
	$(SAM) build --template template.yaml --build-dir .aws-sam/build --cached --cache-dir .aws-sam/cache \
		> .aws-sam-build.log 2>&1 || { cat .aws-sam-build.log; exit 1; }
	@echo ">> sam build: ok (log in .aws-sam-build.log)"

## Line coverage of layers/ and functions/ must stay at 90% or more ([tool.coverage] in pyproject.toml;
## make coverage-branches for branches).
## worksteal: a worker that runs out of tests takes the other's last ones, so no whole file (the slowest
## take a minute) is left on one worker at the end; a file's module fixtures are built by each worker it runs on.
unit: venv
	$(BIN)/pytest -n auto --dist worksteal --cov --cov-fail-under=90 --durations=20

## The unit suite with the wall clock a year ahead (tests/conftest.py --clock-ahead-days): a test that passes
## only until some date (a sample's fixed date, a message older than SQS's retention) fails here, not in a year.
## tests/docs runs the runnable blocks of README.md and docs/*.md, every process they start a year ahead too.
unit-future: venv
	$(BIN)/pytest -q -p no:cacheprovider -n auto --dist worksteal tests/unit tests/docs --clock-ahead-days 365

## Branch coverage of the deployed code (slower: Python 3.13's sys.monitoring does not measure branches, so
## coverage falls back to its settrace core).
coverage-branches: venv
	COVERAGE_CORE=ctrace $(BIN)/pytest -n auto --dist worksteal --cov --cov-branch --cov-fail-under=90

## IaC security scan: every finding fixed or suppressed in template.yaml with a justification.
security: checkov
	@echo ">> checkov (template.yaml)"
	$(CHECKOV) --file template.yaml --framework cloudformation --compact --quiet --skip-download

## Benchmarks: prints the figures and writes docs/benchmarks.md (QUICK=1 skips the test-suite timing). The cold
## starts import what make build ships (.aws-sam/build), as Lambda does.
QUICK ?=
bench: venv build
	PYTHONPATH=.:layers/capacity $(BIN)/python -m bench $(if $(QUICK),--quick,)

## What the stack itself costs per reservation (docs/deploy.md): make demo's lifecycle on the local cloud,
## its state transitions, invocations, API calls and alarm-hours at us-east-1 list prices.
costs-measure: venv
	PYTHONPATH=.:layers/capacity $(BIN)/python scripts/measure_costs.py

## Deploy to the account of your AWS credentials (docs/deploy.md): the template `make template` has just
## linted and built (.aws-sam/build/template.yaml), then `sam deploy` with samconfig.toml; --guided the first
## time the stack is deployed. STACK and REGION choose the stack (REGION default: AWS_DEFAULT_REGION).
STACK ?= capacity-orchestrator
REGION ?= $(AWS_DEFAULT_REGION)
CAPACITY := $(BIN)/python -m capacity_cli
ACCOUNT ?=
## Seconds, before anything is installed or built: credentials, account and Region (scripts/deploy_check.py).
deploy-check:
	@python3 scripts/deploy_check.py --region $(REGION) $(if $(ACCOUNT),--account $(ACCOUNT))

deploy: deploy-check
	@$(MAKE) --no-print-directory template
	@echo ">> cfn-lint of the built template, the one sam deploy uploads"
	$(BIN)/cfn-lint .aws-sam/build/template.yaml
	@mode=$$($(BIN)/python scripts/deploy_preflight.py --stack $(STACK) --region $(REGION)) || exit $$?; \
	$(SAM) deploy --template-file .aws-sam/build/template.yaml --config-file samconfig.toml \
		--stack-name $(STACK) --region $(REGION) $$(test "$$mode" = new && echo --guided)

## After make deploy, in the real account and buying nothing: a dry run (capacity plan) and every route.
smoke: deploy-check
	@$(MAKE) --no-print-directory venv
	$(CAPACITY) --stack $(STACK) --region $(REGION) plan --type ml.p5.48xlarge --count 1 --duration 1d \
		--from +14d --max-fee 100000 --model smoke-check
	$(CAPACITY) --stack $(STACK) --region $(REGION) smoke

## Remove the stack (sam delete asks first); refused while a reservation still holds or waits for capacity.
remove: deploy-check
	@$(MAKE) --no-print-directory venv sam
	$(CAPACITY) --stack $(STACK) --region $(REGION) status --live --fail-if-any
	$(SAM) delete --stack-name $(STACK) --region $(REGION)

## Everything CI checks: lint, types, template, tests.
test: lint typecheck template security unit-future unit

clean:
	rm -rf .aws-sam .pytest_cache .mypy_cache .ruff_cache
