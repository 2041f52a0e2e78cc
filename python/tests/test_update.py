# SPDX-License-Identifier: Apache-2.0

"""Firmware updates through the binding (docs/UPDATES.md §10): the installer's
callbacks as Python methods, against a real broker and hub. The manifest is
signed with the openssl command line, as a release would be."""

import base64
import hashlib
import json
import subprocess
import uuid

import pytest

import thingif
from conftest import publish_command
from test_thingif import onboarded, started, topic_of

IMAGE = bytes((i * 31 + 7) & 0xFF for i in range(5000))


def signer(tmp_path, kid):
    key = tmp_path / ("%s.pem" % kid)
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)], check=True)
    pub = subprocess.run(["openssl", "ec", "-in", str(key), "-pubout"], check=True, capture_output=True).stdout
    return key, pub.decode()


def manifest(image=IMAGE, block_size=1024, thing_type="AirConditioner"):
    hashes = b"".join(hashlib.sha256(image[i:i + block_size]).digest() for i in range(0, len(image), block_size))
    m = {"updateID": "aircon-fw", "version": "1.2.0", "compatible": thing_type, "securityVersion": 1,
         "size": len(image), "sha256": hashlib.sha256(image).hexdigest(), "blockSize": block_size,
         "blocks": (len(image) + block_size - 1) // block_size, "blockHashes": hashlib.sha256(hashes).hexdigest(),
         "metadata": {"slot": "B"}}
    return json.dumps(m).encode()


def sign(key, data, tmp_path):
    f = tmp_path / ("m-%s.json" % uuid.uuid4().hex)
    f.write_bytes(data)
    der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(key), str(f)], check=True,
                         capture_output=True).stdout
    return base64.b64encode(der).decode()


def offer_command(job_id, data, kid, sig):
    cid = "cmd-py-" + uuid.uuid4().hex[:12]
    params = {"jobID": job_id, "attempt": 1, "manifest": base64.b64encode(data).decode(),
              "signatures": [{"kid": kid, "alg": "ES256", "sig": sig}]}
    return cid, {"commandID": cid, "issuer": "user:tester", "actions": [{"_thingif": [{"update": params}]}]}


class Installer:
    """Refuses or defers, as told; records what it was offered."""

    def __init__(self, answer):
        self.answer = answer
        self.offered = []

    def offer(self, thing, info):
        self.offered.append(info)
        return self.answer

    def install(self, thing, info):
        raise AssertionError("nothing is installed in this test")

    def reboot(self, thing):
        pass

    def commit(self, thing):
        return True

    def rollback(self, thing):
        pass


def test_set_installer_checks_its_arguments(make_thing, tmp_path):
    t = make_thing("thing")
    _, pub = signer(tmp_path, "fw-1")
    trust = tmp_path / "trust.json"
    trust.write_text(json.dumps({"keys": [{"kid": "fw-1", "publicKey": pub}]}))
    with pytest.raises(TypeError):
        t.set_installer(object(), "AirConditioner", "1.0.0", trust)

    class WriteOnly(Installer):
        def write(self, thing, offset, data):
            return True
    with pytest.raises(TypeError):
        t.set_installer(WriteOnly(thingif.UpdateDecision.ACCEPT), "AirConditioner", "1.0.0", trust)
    with pytest.raises(thingif.ThingIFError) as e:
        t.set_installer(Installer(thingif.UpdateDecision.ACCEPT), "AirConditioner", "1.0.0", tmp_path / "none.json")
    assert e.value.status == thingif.Status.ERR_STORAGE
    with pytest.raises(thingif.ThingIFError) as e:
        t.set_installer(Installer(thingif.UpdateDecision.ACCEPT), "AirConditioner", "not a version", trust)
    assert e.value.status == thingif.Status.ERR_INVALID
    with pytest.raises(thingif.ThingIFError) as e:
        t.update_status()
    assert e.value.status == thingif.Status.ERR_STATE
    t.set_installer(Installer(thingif.UpdateDecision.ACCEPT), "AirConditioner", "1.0.0", trust)
    assert t.update_status() == (thingif.UpdateStatus.NONE, 0, 0)
    with pytest.raises(thingif.ThingIFError) as e:
        t.update_confirm()
    assert e.value.status == thingif.Status.ERR_STATE


def test_offer_reaches_the_installer_and_its_answer_comes_back(make_thing, hub, broker, tmp_path):
    key, pub = signer(tmp_path, "fw-1")
    trust = tmp_path / "trust.json"
    trust.write_text(json.dumps({"keys": [{"kid": "fw-1", "publicKey": pub}]}))
    t = onboarded(make_thing, hub)
    installer = Installer((thingif.UpdateDecision.REFUSE, "only 1 MB free"))
    t.set_installer(installer, "AirConditioner", "1.0.0", trust)
    started(t)
    data = manifest()
    cid, cmd = offer_command("job-1", data, "fw-1", sign(key, data, tmp_path))
    publish_command(broker, topic_of(t, tmp_path), cmd)
    [result] = hub.wait_results(cid)
    r = result["_thingif"][0]["update"]
    assert r["succeeded"] is False
    assert r["errorMessage"] == "INSTALLER_REFUSED: only 1 MB free"
    assert r["data"] == {"jobID": "job-1", "status": "REJECTED", "reason": "INSTALLER_REFUSED"}
    [info] = installer.offered
    assert (info.job_id, info.update_id, info.version, info.compatible, info.size) == \
        ("job-1", "aircon-fw", "1.2.0", "AirConditioner", len(IMAGE))
    assert info.sha256 == hashlib.sha256(IMAGE).digest()
    assert info.metadata == {"slot": "B"}
    assert info.image_path is not None  # the file mode: no write()
    # Signed by another key: refused before the installer is asked.
    other, _ = signer(tmp_path, "fw-x")
    cid, cmd = offer_command("job-2", data, "fw-1", sign(other, data, tmp_path))
    publish_command(broker, topic_of(t, tmp_path), cmd)
    [result] = hub.wait_results(cid)
    assert result["_thingif"][0]["update"]["data"]["reason"] == "UNTRUSTED"
    assert len(installer.offered) == 1
    # An offer() that raises is a refusal, logged.
    installer.offer = lambda thing, info: 1 / 0
    cid, cmd = offer_command("job-3", data, "fw-1", sign(key, data, tmp_path))
    publish_command(broker, topic_of(t, tmp_path), cmd)
    [result] = hub.wait_results(cid)
    assert result["_thingif"][0]["update"]["data"]["reason"] == "INSTALLER_REFUSED"
    assert t.update_status()[0] == thingif.UpdateStatus.NONE
