#!/usr/bin/env python3
"""docker_check.py's own rules, on small Dockerfiles and a compose file that
break one rule each: the rule fires with its name, and the good form passes it.
Run by `make docker-check` after docker_check.py itself."""
import os
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docker_check  # noqa: E402

GOOD_USER = """\
FROM docker.io/library/debian:bookworm-slim
RUN groupadd --system --gid 10001 app \\
 && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin app
USER 10001:10001
ENTRYPOINT ["app"]
"""


class Rules(unittest.TestCase):
    def setUp(self):
        docker_check.problems.clear()
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def dockerfile(self, text):
        path = os.path.join(self.tmp.name, "Dockerfile")
        with open(path, "w") as f:
            f.write(text)
        docker_check.check_dockerfile(path, sidecar=False)
        return docker_check.problems

    def rule(self, problems, rule):
        return [p for p in problems if f": {rule}: " in p]

    def test_good_user_passes(self):
        self.assertEqual(self.dockerfile(GOOD_USER), [])

    def test_user_group_picks_its_own_gid(self):
        text = GOOD_USER.replace("RUN groupadd --system --gid 10001 app \\\n && ", "RUN ").replace(
            "--gid 10001 --no-create-home", "--user-group --no-create-home")
        found = self.rule(self.dockerfile(text), "user-ids")
        self.assertTrue(any("gid 10001 has no /etc/group entry" in p for p in found), found)
        self.assertTrue(any("--user-group" in p for p in found), found)

    def test_group_by_name_counts(self):
        text = GOOD_USER.replace("--uid 10001 --gid 10001", "--uid 10001 --gid app")
        self.assertEqual(self.dockerfile(text), [])

    def test_primary_group_must_be_users_gid(self):
        text = GOOD_USER.replace("--uid 10001 --gid 10001", "--uid 10001 --gid 0")
        found = self.rule(self.dockerfile(text), "user-ids")
        self.assertTrue(any("primary group" in p for p in found), found)

    def test_uid_without_user(self):
        found = self.rule(self.dockerfile(GOOD_USER.replace("USER 10001:10001", "USER 10002:10001")), "user-ids")
        self.assertTrue(any("uid 10002 has no /etc/passwd entry" in p for p in found), found)

    def test_user_by_name(self):
        found = self.rule(self.dockerfile(GOOD_USER.replace("USER 10001:10001", "USER app")), "user-ids")
        self.assertTrue(any("numeric uid:gid" in p for p in found), found)

    def test_short_base_image(self):
        text = GOOD_USER.replace("docker.io/library/debian", "debian")
        found = self.rule(self.dockerfile(text), "qualified")
        self.assertTrue(any("debian:bookworm-slim" in p for p in found), found)

    def test_short_base_image_through_arg(self):
        text = "ARG R=bookworm\n" + GOOD_USER.replace("docker.io/library/debian:bookworm-slim", "debian:${R}-slim")
        self.assertTrue(self.rule(self.dockerfile(text), "qualified"))

    def compose(self, change):
        with open(os.path.join(docker_check.ROOT, "docker", "docker-compose.yml")) as f:
            doc = yaml.safe_load(f)
        change(doc["services"])
        path = os.path.join(self.tmp.name, "docker-compose.yml")
        with open(path, "w") as f:
            yaml.safe_dump(doc, f)
        docker_check.check_compose(path)
        return self.rule(docker_check.problems, "image")

    def test_compose_images_pass(self):
        self.assertEqual(self.compose(lambda s: None), [])

    def test_compose_short_image(self):
        found = self.compose(lambda s: s["redis"].update(image="redis:7-bookworm"))
        self.assertTrue(any("redis:7-bookworm" in p and "fully qualified" in p for p in found), found)

    def test_compose_built_image_not_local(self):
        def change(s):
            s["migrate"]["image"] = s["relay"]["image"] = "docker.io/library/stagedrain:local"
        found = self.compose(change)
        self.assertTrue(any("localhost/" in p for p in found), found)

    def test_compose_built_without_name(self):
        found = self.compose(lambda s: s["worker"].pop("image"))
        self.assertTrue(any("worker" in p and "no image" in p for p in found), found)


if __name__ == "__main__":
    unittest.main()
