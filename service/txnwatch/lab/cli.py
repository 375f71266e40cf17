"""`txnwatch lab ...`: run a local Kafka cluster, drive it, break it, and ask Kafka's own tool about it.

Mounted by txnwatch.cli.commands as the `lab` sub-command; also runnable as `python -m txnwatch.lab`.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import typer

from txnwatch.lab.errors import LabError
from txnwatch.lab.jars import DEFAULT_KAFKA_VERSION
from txnwatch.lab.settings import DEFAULT_TRANSACTION_MAX_TIMEOUT_MS

app = typer.Typer(no_args_is_help=True, help="Local real-Kafka lab: cluster, workload, faults, reference tool.")
fault_app = typer.Typer(no_args_is_help=True, help="Inject faults into a running lab (each clearable).")
app.add_typer(fault_app, name="fault")

DirOption = typer.Option(None, "--dir", "--lab-dir",
                         help="Lab directory (default $TXNWATCH_LAB_DIR or ~/.local/state/txnwatch/lab).")


def _fail(exc: Exception) -> None:
    typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
    raise typer.Exit(1)


def _load(lab_dir: Path | None):  # -> LabCluster
    from txnwatch.lab.cluster import LabCluster

    try:
        return LabCluster.load(lab_dir)
    except LabError as exc:
        _fail(exc)


@app.command()
def up(
    brokers: int = typer.Option(3, help="Number of brokers."),
    kafka_version: str = typer.Option(DEFAULT_KAFKA_VERSION, "--kafka-version", help="Apache Kafka version (4.1.1, 3.9.1, 4.4.0)."),
    lab_dir: Path | None = DirOption,
    combined: bool = typer.Option(False, help="Combined broker+controller nodes instead of a dedicated controller."),
    proxy: bool = typer.Option(True, help="TCP proxy in front of each broker (latency/cut faults)."),
    transaction_max_timeout_ms: int = typer.Option(DEFAULT_TRANSACTION_MAX_TIMEOUT_MS, help="transaction.max.timeout.ms"),
    partition_verification: bool = typer.Option(True, help="transaction.partition.verification.enable "
                                                           "(Kafka's default; off lets hanging transactions be "
                                                           "injected)."),
    pre_kip_890: bool = typer.Option(False, "--pre-kip-890", help="The pre-KIP-890 setting: partition "
                                                                  "verification off, so `fault hanging` and the "
                                                                  "demo workload can inject hanging transactions."),
    transaction_version: int | None = typer.Option(None, "--transaction-version", min=0, max=2,
                                                      help="transaction.version to finalize at format time "
                                                           "(default: Kafka's, 2 on 4.x, 0 on 3.9)."),
    jmx_exporter: bool = typer.Option(False, "--jmx-exporter", help="Run the Prometheus JMX exporter agent in every "
                                                                    "broker (URLs in `lab status --json`)."),
    broker_config: list[str] = typer.Option([], "--broker-config", "-c", help="Extra broker property KEY=VALUE."),
    reuse: bool = typer.Option(False, "--reuse", help="If a lab is already running in the dir, print its "
                                                     "bootstrap and succeed instead of failing."),
) -> None:
    """Format and start a KRaft cluster on free 127.0.0.1 ports; it keeps running after this command returns."""
    from txnwatch.lab.cluster import LabCluster, start_lab
    from txnwatch.lab.settings import LabSettings, TransactionSettings

    if reuse:
        try:
            running = LabCluster.load(lab_dir)
        except LabError:
            running = None
        if running is not None and all(n["state"] == "running" for n in running.status()["nodes"]):
            typer.echo(running.bootstrap_servers)
            return

    extra = dict(item.split("=", 1) for item in broker_config)
    settings = LabSettings(brokers=brokers, kafka_version=kafka_version, combined=combined, proxy=proxy,
                           jmx_exporter=jmx_exporter,
                           transactions=TransactionSettings(max_timeout_ms=transaction_max_timeout_ms,
                                                            partition_verification_enable=partition_verification
                                                            and not pre_kip_890,
                                                            transaction_version=transaction_version,
                                                            extra=extra))
    try:
        lab = start_lab(settings, lab_dir)
    except LabError as exc:
        _fail(exc)
    typer.echo(lab.bootstrap_servers)


@app.command()
def down(lab_dir: Path | None = DirOption) -> None:
    """Stop exactly the processes `lab up` started (as recorded in the lab's state file)."""
    lab = _load(lab_dir)
    lab.down()
    typer.echo(f"lab in {lab.lab_dir} stopped")


@app.command()
def status(lab_dir: Path | None = DirOption, as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Show the lab's nodes, pids, ports and whether each process is running, frozen or dead."""
    info = _load(lab_dir).status()
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    typer.echo(f"Kafka {info['kafka_version']}  bootstrap {info['bootstrap_servers']}  dir {info['lab_dir']}")
    typer.echo(f"  partition verification {'on' if info['partition_verification'] else 'off (pre-KIP-890)'}")
    for broker, url in info["broker_metrics_urls"].items():
        typer.echo(f"  broker {broker} JMX exporter {url}")
    for n in info["nodes"]:
        typer.echo(f"  node {n['node_id']:>2} {'+'.join(n['roles']):<18} pid {n['pid']!s:>7}  "
                   f"port {n['port'] or '-':>5}  {n['state']}")
    if info["proxy"]:
        p = info["proxy"]
        typer.echo(f"  proxy   pid {p['pid']}  control port {p['control_port']}  {p['state']}")
    for name, w in info["workloads"].items():
        typer.echo(f"  workload {name}  pid {w['pid']}  {w['state']}")


@app.command()
def bootstrap(lab_dir: Path | None = DirOption) -> None:
    """Print the bootstrap servers (for scripts: `--bootstrap-servers $(txnwatch lab bootstrap)`)."""
    typer.echo(_load(lab_dir).bootstrap_servers)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             name="kafka-transactions")
def kafka_transactions(ctx: typer.Context, lab_dir: Path | None = DirOption,
                       bootstrap_servers: str | None = typer.Option(
                           None, "--bootstrap-server", help="Any cluster instead of the lab.")) -> None:
    """Run Kafka's own kafka-transactions tool against the lab: list, describe, describe-producers,
    find-hanging, abort (arguments are passed through)."""
    from txnwatch.lab.reference import run_kafka_transactions

    version = DEFAULT_KAFKA_VERSION
    if bootstrap_servers is None:
        lab = _load(lab_dir)
        bootstrap_servers, version = lab.bootstrap_servers, lab.kafka_version
    try:
        typer.echo(run_kafka_transactions(bootstrap_servers, *ctx.args, kafka_version=version), nl=False)
    except LabError as exc:
        _fail(exc)


@app.command()
def workload(
    scenario: str = typer.Option("demo", help="demo | steady | chaos"),
    duration: float | None = typer.Option(None, help="Seconds to run (default: until Ctrl-C)."),
    lab_dir: Path | None = DirOption,
    bootstrap_servers: str | None = typer.Option(None, "--bootstrap-server", help="Any cluster instead of the lab."),
    topic_prefix: str | None = typer.Option(None, help="Prefix of the workload's topics (default: txnwatch-<scenario>)."),
    verbose: bool = typer.Option(False, "-v", help="Log what the workload does (INFO)."),
    report_every: float = typer.Option(10.0, help="Seconds between progress lines."),
    background: bool = typer.Option(False, "--background", help="Detach; `lab down` or `lab workload-stop` "
                                                                "stops it. Log: <lab dir>/workload-<scenario>.log"),
) -> None:
    """Drive real transactional producers, read_committed/read_uncommitted groups and a
    consume-transform-produce loop; demo and chaos also inject faults. Foreground unless --background."""
    import signal

    from txnwatch.lab.workload import SCENARIOS, Workload

    logging.basicConfig(level=logging.INFO if verbose or background else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if scenario not in SCENARIOS:
        _fail(LabError(f"unknown scenario {scenario!r}; choose from {', '.join(SCENARIOS)}"))
    lab = None
    if bootstrap_servers is None:
        lab = _load(lab_dir)
        bootstrap_servers = lab.bootstrap_servers
        if "hanging" in SCENARIOS[scenario].standing_faults and not lab.settings.transactions.pre_kip_890:
            _fail(LabError(f"the {scenario} scenario injects a hanging transaction, which brokers with "
                           "transaction.partition.verification.enable=true (Kafka's default) reject; start the "
                           "lab with `txnwatch lab up --pre-kip-890`"))
    if background:
        if lab is None:
            _fail(LabError("--background needs a lab (its state file records the process)"))
        assert lab is not None  # _fail does not return
        try:
            pid = lab.start_workload_process(scenario, report_every)
        except LabError as exc:
            _fail(exc)
        typer.echo(f"workload {scenario} running in the background, pid {pid}, log {lab.lab_dir}/workload-{scenario}.log")
        return

    def _terminate(signum, frame):  # `lab down` sends SIGTERM: stop gracefully so faults are cleared
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    runner = Workload(bootstrap_servers, scenario, lab=lab, topic_prefix=topic_prefix)
    typer.echo(f"workload {scenario}: topics {runner.input_topic}, {runner.output_topic}; Ctrl-C to stop", err=True)
    stats = runner.run(duration, report_every=report_every, report=lambda s: typer.echo(
        f"committed {s.transactions_committed} aborted {s.transactions_aborted} ctp {s.ctp_transactions} "
        f"errors {s.producer_errors}+{s.ctp_errors} faults {s.faults_injected[-3:]}", err=True))
    typer.echo(json.dumps(stats.as_dict(), indent=2))


@app.command("workload-stop")
def workload_stop(lab_dir: Path | None = DirOption) -> None:
    """Stop background workloads (their faults are cleared on the way out)."""
    lab = _load(lab_dir)
    names = list(lab.state.workloads)
    lab.stop_workloads()
    typer.echo(f"stopped {', '.join(names) if names else 'nothing'}")


# -- faults ------------------------------------------------------------------------------------------------
# Process and network faults act on the lab and are cleared by a matching command; client-side
# transaction faults live as long as the process holding the producer, so they run until Ctrl-C.


def _hold(fault, describe: str) -> None:
    import time

    typer.echo(describe)
    typer.echo("holding the fault; Ctrl-C clears it", err=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        fault.clear()
        typer.echo("cleared", err=True)


PartitionOption = typer.Option(0, min=0, help="Partition of the topic.")


@fault_app.command("hanging")
def fault_hanging(topic: str, partition: int = PartitionOption, lab_dir: Path | None = DirOption,
                  hold: bool = typer.Option(False, help="Stay in the foreground and abort it on Ctrl-C.")) -> None:
    """A transactional batch the coordinator never heard of (stays until `txnwatch lab kafka-transactions abort`)."""
    from txnwatch.lab.faults import inject_hanging_transaction

    lab = _load(lab_dir)
    try:
        fault = inject_hanging_transaction(lab.bootstrap_servers, topic, partition)
    except LabError as exc:
        hint = "" if lab.settings.transactions.pre_kip_890 else (
            " (this lab runs Kafka's default transaction.partition.verification.enable=true; "
            "start one with `txnwatch lab up --pre-kip-890`)")
        _fail(LabError(f"{exc}{hint}"))
    text = (f"hanging transaction on {topic}-{partition}: producer id {fault.producer_id} epoch "
            f"{fault.producer_epoch} first offset {fault.first_offset} (transactional id {fault.transactional_id})")
    if hold:
        _hold(fault, text)
    else:
        typer.echo(text)
        typer.echo(f"clear with: txnwatch lab kafka-transactions abort --topic {topic} --partition {partition} "
                   f"--start-offset {fault.first_offset}", err=True)


@fault_app.command("lso-stall")
def fault_lso_stall(topic: str, partition: int = PartitionOption, lab_dir: Path | None = DirOption,
                    timeout_ms: int | None = typer.Option(None, help="transaction.timeout.ms (default: the lab's max).")) -> None:
    """Open a transaction and go silent until Ctrl-C (or until the coordinator times it out)."""
    from txnwatch.lab.faults import start_lso_stall

    lab = _load(lab_dir)
    fault = start_lso_stall(lab.bootstrap_servers, topic, partition,
                            transaction_timeout_ms=timeout_ms or lab.transaction_max_timeout_ms)
    _hold(fault, f"LSO of {topic}-{partition} pinned at {fault.first_offset} by {fault.transactional_id}")


@fault_app.command("coordinator-timeout")
def fault_coordinator_timeout(topic: str, partition: int = PartitionOption, lab_dir: Path | None = DirOption,
                              timeout_ms: int = typer.Option(2000, help="The producer's transaction.timeout.ms.")) -> None:
    """Open a transaction with a short timeout, let the coordinator abort it and bump the epoch, then
    show what the late producer's commit gets (KIP-588)."""
    from txnwatch.lab.faults import coordinator_timeout_abort

    with coordinator_timeout_abort(_load(lab_dir).bootstrap_servers, topic, partition,
                                   transaction_timeout_ms=timeout_ms) as fault:
        typer.echo(f"{fault.transactional_id}: producer id {fault.producer_id} epoch {fault.epoch_before} -> "
                   f"{fault.epoch_after} ({fault.final_state}); late commit: {fault.late_commit()!r}")


@fault_app.command("fence")
def fault_fence(topic: str, partition: int = PartitionOption, lab_dir: Path | None = DirOption) -> None:
    """Start a second producer with a running producer's transactional.id and show the zombie's fate."""
    from txnwatch.lab.faults import fence_producer

    with fence_producer(_load(lab_dir).bootstrap_servers, topic, partition) as fencing:
        typer.echo(f"{fencing.transactional_id}: epoch {fencing.zombie_epoch} fenced by {fencing.successor_epoch}; "
                   f"zombie commit: {fencing.zombie_commit()!r}")


@fault_app.command("freeze")
def fault_freeze(node_id: int, lab_dir: Path | None = DirOption) -> None:
    """SIGSTOP a broker (clear with `fault thaw`)."""
    _load(lab_dir).freeze_broker(node_id)
    typer.echo(f"node {node_id} frozen")


@fault_app.command("thaw")
def fault_thaw(node_id: int, lab_dir: Path | None = DirOption) -> None:
    """SIGCONT a frozen broker."""
    _load(lab_dir).thaw_broker(node_id)
    typer.echo(f"node {node_id} resumed")


@fault_app.command("stop")
def fault_stop(node_id: int, lab_dir: Path | None = DirOption,
               kill: bool = typer.Option(False, help="SIGKILL (crash) instead of a controlled shutdown.")) -> None:
    """Stop a broker (clear with `fault start`)."""
    _load(lab_dir).stop_broker(node_id, kill=kill)
    typer.echo(f"node {node_id} stopped")


@fault_app.command("start")
def fault_start(node_id: int, lab_dir: Path | None = DirOption) -> None:
    """Start a stopped broker again (waits until the proxy follows it)."""
    lab = _load(lab_dir)
    try:
        lab.start_broker(node_id)
    except LabError as exc:
        _fail(exc)
    typer.echo(f"node {node_id} running (pid {lab.node(node_id).pid})")


@fault_app.command("coordinator-failover")
def fault_coordinator_failover(transactional_id: str, lab_dir: Path | None = DirOption) -> None:
    """Stop the broker leading the transactional id's __transaction_state partition (clear: `fault start`)."""
    from txnwatch.lab.faults import fail_over_coordinator

    failover = fail_over_coordinator(_load(lab_dir), transactional_id)
    typer.echo(f"stopped coordinator node {failover.old_coordinator}; new coordinator {failover.new_coordinator()}")


@fault_app.command("latency")
def fault_latency(ms: float, node_id: int | None = typer.Option(None, "--node", help="Broker (default: all)."),
                  lab_dir: Path | None = DirOption) -> None:
    """Add one-way latency between clients and a broker (0 clears)."""
    _load(lab_dir).proxy.delay(node_id, ms)
    typer.echo(f"latency {ms} ms on {'all brokers' if node_id is None else f'node {node_id}'}")


@fault_app.command("cut")
def fault_cut(node_id: int | None = typer.Option(None, "--node", help="Broker (default: all)."), lab_dir: Path | None = DirOption,
              block: bool = typer.Option(False, help="Also refuse new connections until `fault clear-network`.")) -> None:
    """Drop clients' connections to a broker."""
    reply = _load(lab_dir).proxy.cut(node_id, block=block)
    typer.echo(f"cut {reply['cut']} connection(s)")


@fault_app.command("clear-network")
def fault_clear_network(node_id: int | None = typer.Option(None, "--node", help="Broker (default: all)."),
                        lab_dir: Path | None = DirOption) -> None:
    """Remove latency and cuts, and accept connections again."""
    _load(lab_dir).proxy.clear(node_id)
    typer.echo("network faults cleared")


def main() -> None:
    app()
