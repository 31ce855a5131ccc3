"""docker-compose.yml only uses commands and flags the CLI has, and describes a real 3-server ensemble."""

import shlex
from pathlib import Path

import pytest
import yaml

from zkcoord.cli import build_parser
from zkcoord.cli.common import parse_key_values
from zkcoord.server.config import node_config

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
COORDINATORS = {name: service for name, service in SERVICES.items() if "build" in service}
ZOOKEEPERS = {name: service for name, service in SERVICES.items() if service.get("image", "").startswith("zookeeper")}


def test_three_coordinators_and_three_zookeepers():
    assert len(COORDINATORS) == 3
    assert len(ZOOKEEPERS) == 3


@pytest.mark.parametrize("name", sorted(COORDINATORS))
def test_coordinator_command_parses_with_the_cli(name):
    args = build_parser().parse_args(shlex.split(COORDINATORS[name]["command"]))
    assert args.func.__name__ == "cmd_coordinator_start"
    config = node_config(parse_key_values(args.override or [], "--override"))
    assert config.coordinator.offsets_topic_num_partitions == 50
    assert args.log_dir.startswith("/var/lib/zkcoord")
    # They bind 0.0.0.0 inside their containers: never without SASL and ACLs.
    assert config.security.for_listener("ZKCOORD").protocol == "SASL_PLAINTEXT" and config.security.authorizes
    assert all(port.startswith("127.0.0.1:") for port in COORDINATORS[name]["ports"])


def test_the_super_user_is_made_before_the_coordinators_start():
    setup = SERVICES["admin-user"]
    args = build_parser().parse_args(shlex.split(setup["command"].replace("${ZKCOORD_ADMIN_PASSWORD:-", "{")))
    assert args.func.__name__ == "cmd_users" and args.entity_name == "admin"
    assert all(service["depends_on"]["admin-user"] for service in COORDINATORS.values())


def test_coordinators_share_one_log_volume_and_have_distinct_ids():
    commands = [build_parser().parse_args(shlex.split(service["command"])) for service in COORDINATORS.values()]
    assert len({args.node_id for args in commands}) == 3
    assert len({args.log_dir for args in commands}) == 1
    volumes = {tuple(service["volumes"]) for service in COORDINATORS.values()}
    assert len(volumes) == 1
    volume = next(iter(volumes))[0].split(":")[0]
    assert volume in COMPOSE["volumes"]


def test_zookeeper_ensemble_follows_the_official_image_conventions():
    ids = sorted(int(service["environment"]["ZOO_MY_ID"]) for service in ZOOKEEPERS.values())
    assert ids == [1, 2, 3]
    for name, service in ZOOKEEPERS.items():
        servers = service["environment"]["ZOO_SERVERS"].split()
        assert sorted(entry.split("=")[0] for entry in servers) == ["server.1", "server.2", "server.3"]
        own = f"server.{service['environment']['ZOO_MY_ID']}={service['hostname']}:"
        assert any(entry.startswith(own) for entry in servers), name


def test_dockerfile_runs_the_cli():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["zkcoord"]' in dockerfile
