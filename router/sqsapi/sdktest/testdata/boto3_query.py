"""Drives the sqsapi broker with boto3 over SQS's query protocol (form bodies, XML answers).

Run by TestBoto3Query with the broker's endpoint, access key and secret; exits 3 when the boto3 it
imports speaks SQS's JSON protocol (botocore 1.31 and later), 0 when every check passed.
"""
import base64
import hashlib
import json
import struct
import sys
import time

import boto3
import botocore

endpoint, access_key, secret_key = sys.argv[1], sys.argv[2], sys.argv[3]
# "redrive": the endpoint moves a message received maxReceiveCount times to its dead-letter
# queue (cmd/sqsd does; the tests' broker wires no OnQuarantine).
redrive = sys.argv[4:] == ["redrive"]


def client(key=access_key, secret=secret_key):
    return boto3.client("sqs", region_name="us-east-1", endpoint_url=endpoint,
                        aws_access_key_id=key, aws_secret_access_key=secret)


c = client()
if c.meta.service_model.protocol != "query":
    print("boto3 %s speaks %s" % (boto3.__version__, c.meta.service_model.protocol))
    sys.exit(3)


def attributes_md5(attrs):
    """MD5OfMessageAttributes as AWS's SQS developer guide defines it."""
    h = hashlib.md5()
    for name in sorted(attrs):
        a = attrs[name]
        for part in (name.encode(), a["DataType"].encode()):
            h.update(struct.pack(">I", len(part)) + part)
        if a["DataType"].startswith("Binary"):
            h.update(b"\x02" + struct.pack(">I", len(a["BinaryValue"])) + a["BinaryValue"])
        else:
            v = a["StringValue"].encode()
            h.update(b"\x01" + struct.pack(">I", len(v)) + v)
    return h.hexdigest()


def expect_error(code, f, **kw):
    try:
        f(**kw)
    except botocore.exceptions.ClientError as e:
        assert e.response["Error"]["Code"] == code, (code, e.response)
        return e
    raise AssertionError("no %s" % code)


q = c.get_queue_url(QueueName="orders")["QueueUrl"]
assert q == endpoint + "/orders", q

attrs = {
    "s": {"DataType": "String", "StringValue": "text <&> é"},
    "n": {"DataType": "Number.float", "StringValue": "1.5"},
    "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
    "gif": {"DataType": "Binary.gif", "BinaryValue": b"GIF89a"},
}
trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
body = "hello <query> & \"xml\"\r\n\ttabbed"
sent = c.send_message(QueueUrl=q, MessageBody=body, MessageAttributes=attrs,
                      MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": trace}})
assert sent["MD5OfMessageBody"] == hashlib.md5(body.encode()).hexdigest(), sent
assert sent["MD5OfMessageAttributes"] == attributes_md5(attrs), sent
assert sent["MessageId"] == "0:0", sent

batch = c.send_message_batch(QueueUrl=q, Entries=[
    {"Id": "a", "MessageBody": "one"},
    {"Id": "b", "MessageBody": "two", "MessageAttributes": {"k": {"DataType": "Number", "StringValue": "7"}}},
    {"Id": "c", "MessageBody": "three", "DelaySeconds": 901},
])
assert [e["Id"] for e in batch["Successful"]] == ["a", "b"], batch
assert [(e["Id"], e["Code"], e["SenderFault"]) for e in batch["Failed"]] == [("c", "InvalidParameterValue", True)], batch

got = c.receive_message(QueueUrl=q, MaxNumberOfMessages=10, WaitTimeSeconds=1, AttributeNames=["All"],
                        MessageAttributeNames=["All"])["Messages"]
# The message sent alone first, then the batch's two (a standard queue's batch is sent at once:
# in either order).
assert [m["Body"] for m in got][0] == body and sorted(m["Body"] for m in got[1:]) == ["one", "two"], got
m = got[0]
assert m["MD5OfBody"] == hashlib.md5(body.encode()).hexdigest(), m
assert m["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"], m
assert {k: v["DataType"] for k, v in m["MessageAttributes"].items()} == {k: v["DataType"] for k, v in attrs.items()}, m
assert m["MessageAttributes"]["b"]["BinaryValue"] == b"\x00\x01", m
assert m["MessageAttributes"]["s"]["StringValue"] == "text <&> é", m
assert m["Attributes"]["ApproximateReceiveCount"] == "1", m
assert m["Attributes"]["AWSTraceHeader"] == trace, m
first_receive = m["Attributes"]["ApproximateFirstReceiveTimestamp"]
two = next(x for x in got if x["Body"] == "two")
assert two["MessageAttributes"]["k"] == {"StringValue": "7", "DataType": "Number"}, two

# Every receive counts: a give-up by ChangeMessageVisibility 0, six times.
handle = m["ReceiptHandle"]
for want in range(2, 7):
    c.change_message_visibility(QueueUrl=q, ReceiptHandle=handle, VisibilityTimeout=0)
    again = c.receive_message(QueueUrl=q, AttributeNames=["All"])["Messages"]
    assert len(again) == 1 and again[0]["MessageId"] == "0:0", again
    assert again[0]["Attributes"]["ApproximateReceiveCount"] == str(want), again
    assert again[0]["Attributes"]["ApproximateFirstReceiveTimestamp"] == first_receive, again
    handle = again[0]["ReceiptHandle"]

res = c.change_message_visibility_batch(QueueUrl=q, Entries=[
    {"Id": "keep", "ReceiptHandle": got[1]["ReceiptHandle"], "VisibilityTimeout": 600},
    {"Id": "bad", "ReceiptHandle": "nope", "VisibilityTimeout": 5},
])
assert [e["Id"] for e in res["Successful"]] == ["keep"], res
assert [(e["Id"], e["Code"]) for e in res["Failed"]] == [("bad", "ReceiptHandleIsInvalid")], res
c.delete_message(QueueUrl=q, ReceiptHandle=handle)
res = c.delete_message_batch(QueueUrl=q, Entries=[
    {"Id": "one", "ReceiptHandle": got[1]["ReceiptHandle"]},
    {"Id": "two", "ReceiptHandle": got[2]["ReceiptHandle"]},
])
assert sorted(e["Id"] for e in res["Successful"]) == ["one", "two"], res
assert "Messages" not in c.receive_message(QueueUrl=q), "all deleted"

qa = c.get_queue_attributes(QueueUrl=q, AttributeNames=["All"])["Attributes"]
assert {k: qa[k] for k in ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                           "ApproximateNumberOfMessagesDelayed")} == {
    "ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0",
    "ApproximateNumberOfMessagesDelayed": "0"}, qa
assert qa["QueueArn"] == "arn:aws:sqs:us-east-1:000000000000:orders", qa

# A delayed message is not received before its delay ends (a minute: not in this run), and
# counts as delayed once read; one delayed a second comes to a long-poll as it ends.
c.send_message(QueueUrl=q, MessageBody="in a minute", DelaySeconds=60)
assert "Messages" not in c.receive_message(QueueUrl=q), "delayed a minute"
delayed = c.get_queue_attributes(QueueUrl=q, AttributeNames=["ApproximateNumberOfMessagesDelayed"])["Attributes"]
assert delayed["ApproximateNumberOfMessagesDelayed"] == "1", delayed
delay_sent = time.monotonic()
c.send_message(QueueUrl=q, MessageBody="in a second", DelaySeconds=1)
later = c.receive_message(QueueUrl=q, WaitTimeSeconds=20)["Messages"]
assert [m["Body"] for m in later] == ["in a second"], later
assert time.monotonic() - delay_sent >= 1, "not before its delay"
c.delete_message(QueueUrl=q, ReceiptHandle=later[0]["ReceiptHandle"])

# Queue management: create (again: the same URL; another attribute: QueueAlreadyExists), list
# a page at a time, set attributes that act, tags, purge, delete.
jobs = c.create_queue(QueueName="jobs", Attributes={"VisibilityTimeout": "60", "MaximumMessageSize": "1024"},
                      tags={"team": "a"})["QueueUrl"]
assert jobs == endpoint + "/jobs", jobs
assert c.create_queue(QueueName="jobs", Attributes={"VisibilityTimeout": "60"})["QueueUrl"] == jobs
expect_error("QueueAlreadyExists", c.create_queue, QueueName="jobs", Attributes={"VisibilityTimeout": "61"})
for n in ("jobs-2", "jobs-3"):
    c.create_queue(QueueName=n)
urls, kw = [], {"QueueNamePrefix": "jobs", "MaxResults": 2}
while True:
    page = c.list_queues(**kw)
    urls += page.get("QueueUrls", [])
    if "NextToken" not in page:
        break
    kw["NextToken"] = page["NextToken"]
assert urls == [jobs, jobs + "-2", jobs + "-3"], urls
assert c.list_queues(QueueNamePrefix="none").get("QueueUrls") is None
ja = c.get_queue_attributes(QueueUrl=jobs, AttributeNames=["VisibilityTimeout", "MaximumMessageSize", "CreatedTimestamp"])["Attributes"]
assert ja["VisibilityTimeout"] == "60" and ja["MaximumMessageSize"] == "1024" and int(ja["CreatedTimestamp"]) > 0, ja
expect_error("InvalidParameterValue", c.send_message, QueueUrl=jobs, MessageBody="x" * 1025)
c.set_queue_attributes(QueueUrl=jobs, Attributes={"MaximumMessageSize": "2048"})
c.send_message(QueueUrl=jobs, MessageBody="x" * 1025)
expect_error("InvalidAttributeValue", c.set_queue_attributes, QueueUrl=jobs, Attributes={"DelaySeconds": "901"})
expect_error("InvalidAttributeName", c.set_queue_attributes, QueueUrl=jobs, Attributes={"Bogus": "5"})
c.tag_queue(QueueUrl=jobs, Tags={"env": "test"})
c.untag_queue(QueueUrl=jobs, TagKeys=["team"])
assert c.list_queue_tags(QueueUrl=jobs)["Tags"] == {"env": "test"}
c.purge_queue(QueueUrl=jobs)
assert "Messages" not in c.receive_message(QueueUrl=jobs, MaxNumberOfMessages=10), "purged"
try:
    c.purge_queue(QueueUrl=jobs)
    raise AssertionError("no PurgeQueueInProgress: one purge in 60 s")
except c.exceptions.PurgeQueueInProgress:
    pass
c.delete_queue(QueueUrl=jobs)
try:
    c.get_queue_url(QueueName="jobs")
    raise AssertionError("no QueueDoesNotExist")
except c.exceptions.QueueDoesNotExist:
    pass
try:
    c.create_queue(QueueName="jobs")
    raise AssertionError("no QueueDeletedRecently: a deleted queue's name is refused for 60 s")
except c.exceptions.QueueDeletedRecently:
    pass

# A FIFO queue: each group in order in the XML's attributes; a resend within the
# deduplication window answers the original's MessageId and SequenceNumber and sends nothing.
expect_error("InvalidParameterValue", c.create_queue, QueueName="boto.fifo")
fifo = c.create_queue(QueueName="boto.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
fa = c.get_queue_attributes(QueueUrl=fifo, AttributeNames=["All"])["Attributes"]
assert fa["FifoQueue"] == "true" and fa["ContentBasedDeduplication"] == "false", fa
fs = c.send_message_batch(QueueUrl=fifo, Entries=[
    {"Id": m, "MessageBody": m, "MessageGroupId": m[0], "MessageDeduplicationId": m} for m in ("a1", "b1", "a2")])
assert len(fs["Successful"]) == 3 and all(e["SequenceNumber"] for e in fs["Successful"]), fs
first = c.send_message(QueueUrl=fifo, MessageBody="again", MessageGroupId="a", MessageDeduplicationId="a1")
a1 = [e for e in fs["Successful"] if e["Id"] == "a1"][0]
assert (first["MessageId"], first["SequenceNumber"]) == (a1["MessageId"], a1["SequenceNumber"]), (first, a1)
expect_error("MissingParameter", c.send_message, QueueUrl=fifo, MessageBody="x", MessageDeduplicationId="x")
expect_error("InvalidParameterValue", c.send_message, QueueUrl=fifo, MessageBody="x", MessageGroupId="a")
fm = c.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10, AttributeNames=["All"], ReceiveRequestAttemptId="r1")["Messages"]
groups = {}
for m in fm:
    groups.setdefault(m["Attributes"]["MessageGroupId"], []).append(m["Body"])
    assert m["Attributes"]["MessageDeduplicationId"] == m["Body"], m
assert groups == {"a": ["a1", "a2"], "b": ["b1"]}, groups
assert "Messages" not in c.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10), "a and b in flight"
d = c.delete_message_batch(QueueUrl=fifo, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(fm)])
assert len(d["Successful"]) == 3, d
assert "Messages" not in c.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10), "the resend was not sent"

# Errors: the SDK's modeled exceptions, by the query codes.
try:
    c.get_queue_url(QueueName="nope")
    raise AssertionError("no QueueDoesNotExist")
except c.exceptions.QueueDoesNotExist:
    pass
expect_error("ReceiptHandleIsInvalid", c.delete_message, QueueUrl=q, ReceiptHandle="0:0:1")
expect_error("AWS.SimpleQueueService.UnsupportedOperation", c.add_permission, QueueUrl=q, Label="l",
             AWSAccountIds=["000000000000"], Actions=["SendMessage"])
expect_error("InvalidParameterValue", c.receive_message, QueueUrl=q, MaxNumberOfMessages=11)
expect_error("InvalidParameterValue", c.send_message, QueueUrl=q, MessageBody="x" * (1 << 20 + 1))
# Signatures: a wrong secret, an unknown key.
expect_error("SignatureDoesNotMatch", client(secret="not the secret").send_message, QueueUrl=q, MessageBody="x")
expect_error("InvalidClientTokenId", client(key="AKIDNOBODY").send_message, QueueUrl=q, MessageBody="x")
assert "Messages" not in c.receive_message(QueueUrl=q), "the refused sends sent nothing"
big = "m" * (1 << 20)
c.send_message(QueueUrl=q, MessageBody=big)
assert c.receive_message(QueueUrl=q)["Messages"][0]["Body"] == big

# A RedrivePolicy (as an attribute: botocore 1.29 knows no message move tasks), kept as SQS
# writes it; a bad one refused.
dead = c.create_queue(QueueName="dead")["QueueUrl"]
dead_arn = c.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
src = c.create_queue(QueueName="src", Attributes={
    "RedrivePolicy": '{"maxReceiveCount":"2","deadLetterTargetArn":"%s"}' % dead_arn})["QueueUrl"]
policy = c.get_queue_attributes(QueueUrl=src, AttributeNames=["RedrivePolicy"])["Attributes"]["RedrivePolicy"]
assert json.loads(policy) == {"deadLetterTargetArn": dead_arn, "maxReceiveCount": 2}, policy
expect_error("InvalidParameterValue", c.set_queue_attributes, QueueUrl=src,
             Attributes={"RedrivePolicy": '{"maxReceiveCount":"0","deadLetterTargetArn":"%s"}' % dead_arn})
assert c.list_dead_letter_source_queues(QueueUrl=dead)["queueUrls"] == [src]
if redrive:
    sent = c.send_message(QueueUrl=src, MessageBody="poison", MessageAttributes={"n": attrs["n"]})
    for i in range(2):
        m = c.receive_message(QueueUrl=src, WaitTimeSeconds=5, AttributeNames=["ApproximateReceiveCount"])["Messages"][0]
        assert m["Attributes"]["ApproximateReceiveCount"] == str(i + 1), m
        c.change_message_visibility(QueueUrl=src, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    m = c.receive_message(QueueUrl=dead, WaitTimeSeconds=5, MessageAttributeNames=["All"])["Messages"][0]
    assert m["Body"] == "poison" and m["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"], m
    assert "Messages" not in c.receive_message(QueueUrl=src), "moved, not redelivered"

print("OK boto3 %s botocore %s%s" % (boto3.__version__, botocore.__version__, " (redrive)" if redrive else ""))
