// The AWS SDK for JavaScript v3 (@aws-sdk/client-sqs, AWS JSON 1.0) driving router/sqsapi:
// run by js_test.go as
//
//	node sqs_client.js ENDPOINT ACCESS_KEY SECRET_KEY [redrive]
//
// with NODE_PATH naming the node_modules of package-lock.json. It prints "OK js <version>"
// and exits 0 when every check holds; exit 3 means no SDK could be loaded.
"use strict";

const assert = require("node:assert/strict");
const crypto = require("node:crypto");

let sqs, sdkVersion;
try {
  sqs = require("@aws-sdk/client-sqs");
  sdkVersion = require("@aws-sdk/client-sqs/package.json").version;
} catch (err) {
  console.error("no @aws-sdk/client-sqs: " + err.message);
  process.exit(3);
}

const [endpoint, accessKeyId, secretAccessKey, mode] = process.argv.slice(2);

function client(key = accessKeyId, secret = secretAccessKey) {
  // Static credentials: every request is signed with SigV4 as an application's would be.
  return new sqs.SQSClient({
    region: "us-east-1",
    endpoint,
    credentials: { accessKeyId: key, secretAccessKey: secret },
    maxAttempts: 1, // a refusal is reported, not retried
  });
}

const c = client();
const send = (command) => c.send(command);

function md5hex(data) {
  return crypto.createHash("md5").update(data).digest("hex");
}

// The MD5 of message attributes as SQS computes it (and the SDKs for Java and Go check it):
// for each attribute in order of name, its name, data type and value, each as a 4-byte
// big-endian length and its bytes, with a transport byte (1 String and Number, 2 Binary)
// before the value.
function md5OfAttributes(attrs) {
  const parts = [];
  const lenPrefixed = (buf) => {
    const n = Buffer.alloc(4);
    n.writeUInt32BE(buf.length);
    parts.push(n, buf);
  };
  for (const name of Object.keys(attrs).sort()) {
    const a = attrs[name];
    lenPrefixed(Buffer.from(name, "utf8"));
    lenPrefixed(Buffer.from(a.DataType, "utf8"));
    if (a.BinaryValue !== undefined) {
      parts.push(Buffer.from([2]));
      lenPrefixed(Buffer.from(a.BinaryValue));
    } else {
      parts.push(Buffer.from([1]));
      lenPrefixed(Buffer.from(a.StringValue, "utf8"));
    }
  }
  return md5hex(Buffer.concat(parts));
}

// expectError runs fn and checks it fails with the SDK error named name.
async function expectError(name, fn) {
  try {
    await fn();
  } catch (err) {
    assert.equal(err.name, name, `${name} expected, got ${err.name}: ${err.message}`);
    return err;
  }
  assert.fail(`no ${name}`);
}

// receiveUntil long-polls queue until want(messages so far) holds, at most tries polls of
// wait seconds (a bound on a broken server, not a timing).
async function receiveUntil(queue, want, { wait = 5, tries = 12, del = false } = {}) {
  const got = [];
  for (let i = 0; i < tries && !want(got); i++) {
    const out = await send(new sqs.ReceiveMessageCommand({
      QueueUrl: queue, MaxNumberOfMessages: 10, WaitTimeSeconds: wait,
      MessageAttributeNames: ["All"], MessageSystemAttributeNames: ["All"],
    }));
    for (const m of out.Messages ?? []) {
      got.push(m);
      if (del) await send(new sqs.DeleteMessageCommand({ QueueUrl: queue, ReceiptHandle: m.ReceiptHandle }));
    }
  }
  assert.ok(want(got), `received ${got.length} messages from ${queue}, not all wanted`);
  return got;
}

async function counts(queue) {
  const out = await send(new sqs.GetQueueAttributesCommand({
    QueueUrl: queue, AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
  }));
  return [Number(out.Attributes.ApproximateNumberOfMessages), Number(out.Attributes.ApproximateNumberOfMessagesNotVisible)];
}

async function main() {
  // Queues.
  const dlq = (await send(new sqs.CreateQueueCommand({ QueueName: "js-dlq" }))).QueueUrl;
  const jobs = (await send(new sqs.CreateQueueCommand({
    QueueName: "js-jobs", Attributes: { VisibilityTimeout: "30" }, tags: { sdk: "js" },
  }))).QueueUrl;
  assert.equal((await send(new sqs.GetQueueUrlCommand({ QueueName: "js-jobs" }))).QueueUrl, jobs);
  const listed = await send(new sqs.ListQueuesCommand({ QueueNamePrefix: "js-" }));
  assert.deepEqual(listed.QueueUrls, [dlq, jobs]);
  const dlqArn = (await send(new sqs.GetQueueAttributesCommand({ QueueUrl: dlq, AttributeNames: ["QueueArn"] }))).Attributes.QueueArn;
  assert.match(dlqArn, /^arn:aws:sqs:us-east-1:\d{12}:js-dlq$/);

  // A send with String, Number and Binary attributes (and a custom type): the body's and the
  // attributes' MD5s are SQS's.
  const body = "héllo ✓ from js";
  const attrs = {
    colour: { DataType: "String", StringValue: "blue ✓" },
    count: { DataType: "Number", StringValue: "1.5" },
    blob: { DataType: "Binary", BinaryValue: new Uint8Array([0, 1, 2, 254, 255]) },
    size: { DataType: "Number.int", StringValue: "42" },
  };
  const sent = await send(new sqs.SendMessageCommand({ QueueUrl: jobs, MessageBody: body, MessageAttributes: attrs }));
  assert.equal(sent.MD5OfMessageBody, md5hex(Buffer.from(body, "utf8")));
  assert.equal(sent.MD5OfMessageAttributes, md5OfAttributes(attrs));
  assert.ok(sent.MessageId);

  // A batch, one entry with an attribute.
  const batch = await send(new sqs.SendMessageBatchCommand({
    QueueUrl: jobs, Entries: [
      { Id: "a", MessageBody: "batch a" },
      { Id: "b", MessageBody: "batch b", MessageAttributes: { k: { DataType: "String", StringValue: "v" } } },
      { Id: "c", MessageBody: "batch c" },
    ],
  }));
  assert.deepEqual((batch.Failed ?? []).length, 0, JSON.stringify(batch.Failed));
  assert.equal(batch.Successful.length, 3);
  const b = batch.Successful.find((e) => e.Id === "b");
  assert.equal(b.MD5OfMessageBody, md5hex("batch b"));
  assert.equal(b.MD5OfMessageAttributes, md5OfAttributes({ k: { DataType: "String", StringValue: "v" } }));

  // Receive all four (the SDK checks each MD5OfBody itself); the attributes come back with
  // their types, and the MD5 the send answered.
  const got = await receiveUntil(jobs, (ms) => ms.length >= 4);
  assert.equal(got.length, 4);
  const first = got.find((m) => m.Body === body);
  assert.ok(first, "the attributed message");
  assert.equal(first.MD5OfBody, sent.MD5OfMessageBody);
  assert.equal(first.MD5OfMessageAttributes, sent.MD5OfMessageAttributes);
  assert.equal(first.MessageAttributes.colour.StringValue, "blue ✓");
  assert.equal(first.MessageAttributes.count.DataType, "Number");
  assert.equal(first.MessageAttributes.count.StringValue, "1.5");
  assert.equal(first.MessageAttributes.size.DataType, "Number.int");
  assert.equal(first.MessageAttributes.blob.DataType, "Binary");
  assert.deepEqual(Buffer.from(first.MessageAttributes.blob.BinaryValue), Buffer.from([0, 1, 2, 254, 255]));
  assert.equal(first.Attributes.ApproximateReceiveCount, "1");
  assert.ok(Number(first.Attributes.SentTimestamp) > 0);
  assert.equal(md5OfAttributes(first.MessageAttributes), first.MD5OfMessageAttributes);
  assert.deepEqual(await counts(jobs), [0, 4]);

  // Visibility: one given back at once (received again, its count 2), one extended.
  const [back, kept, ...rest] = got;
  await send(new sqs.ChangeMessageVisibilityCommand({ QueueUrl: jobs, ReceiptHandle: back.ReceiptHandle, VisibilityTimeout: 0 }));
  const again = await receiveUntil(jobs, (ms) => ms.length >= 1);
  assert.equal(again.length, 1);
  assert.equal(again[0].Body, back.Body);
  assert.equal(again[0].Attributes.ApproximateReceiveCount, "2");
  const changed = await send(new sqs.ChangeMessageVisibilityBatchCommand({
    QueueUrl: jobs, Entries: [{ Id: "k", ReceiptHandle: kept.ReceiptHandle, VisibilityTimeout: 600 }],
  }));
  assert.equal(changed.Successful.length, 1);
  const none = await send(new sqs.ReceiveMessageCommand({ QueueUrl: jobs, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
  assert.equal((none.Messages ?? []).length, 0, "every message leased");

  // Delete: one alone, the rest in a batch. The message's first handle, superseded by its
  // second receive, is refused as expired (InvalidParameterValue, as SQS answers an expired
  // handle); the second deletes it, and a retried delete (of a message deleted already, by
  // either handle) succeeds.
  await assert.rejects(send(new sqs.DeleteMessageCommand({ QueueUrl: jobs, ReceiptHandle: back.ReceiptHandle })),
    (err) => err.name === "InvalidParameterValue" && /The receipt handle has expired/.test(err.message));
  await send(new sqs.DeleteMessageCommand({ QueueUrl: jobs, ReceiptHandle: again[0].ReceiptHandle }));
  await send(new sqs.DeleteMessageCommand({ QueueUrl: jobs, ReceiptHandle: again[0].ReceiptHandle }));
  await send(new sqs.DeleteMessageCommand({ QueueUrl: jobs, ReceiptHandle: back.ReceiptHandle }));
  const deleted = await send(new sqs.DeleteMessageBatchCommand({
    QueueUrl: jobs, Entries: [kept, ...rest].map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle })),
  }));
  assert.equal(deleted.Successful.length, 3, JSON.stringify(deleted.Failed));
  assert.deepEqual(await counts(jobs), [0, 0]);

  // A long-poll ends when a message arrives: the receive waits up to 20 s, the send comes
  // while it waits (or just before it: either way it is received).
  const polled = send(new sqs.ReceiveMessageCommand({ QueueUrl: jobs, WaitTimeSeconds: 20 }));
  await send(new sqs.SendMessageCommand({ QueueUrl: jobs, MessageBody: "while polling" }));
  const woke = await polled;
  assert.equal(woke.Messages?.[0]?.Body, "while polling");
  await send(new sqs.DeleteMessageCommand({ QueueUrl: jobs, ReceiptHandle: woke.Messages[0].ReceiptHandle }));

  // A delayed message is not received before its delay ends (a minute: not in this run),
  // and counts as delayed once read; one delayed a second comes to a long-poll as it ends.
  await send(new sqs.SendMessageCommand({ QueueUrl: jobs, MessageBody: "in a minute", DelaySeconds: 60 }));
  const notYet = await send(new sqs.ReceiveMessageCommand({ QueueUrl: jobs, MaxNumberOfMessages: 10 }));
  assert.equal((notYet.Messages ?? []).length, 0, "delayed a minute");
  const delayed = await send(new sqs.GetQueueAttributesCommand({ QueueUrl: jobs, AttributeNames: ["ApproximateNumberOfMessagesDelayed"] }));
  assert.equal(delayed.Attributes.ApproximateNumberOfMessagesDelayed, "1");
  const delaySent = Date.now();
  await send(new sqs.SendMessageCommand({ QueueUrl: jobs, MessageBody: "in a second", DelaySeconds: 1 }));
  const later = await send(new sqs.ReceiveMessageCommand({ QueueUrl: jobs, WaitTimeSeconds: 20 }));
  assert.equal(later.Messages?.[0]?.Body, "in a second");
  assert.ok(Date.now() - delaySent >= 1000, "not before its delay");
  await send(new sqs.DeleteMessageCommand({ QueueUrl: jobs, ReceiptHandle: later.Messages[0].ReceiptHandle }));

  // Purge: everything goes (the message delayed a minute too); a second purge within 60 s is
  // refused.
  for (const m of ["p1", "p2"]) await send(new sqs.SendMessageCommand({ QueueUrl: jobs, MessageBody: m }));
  await send(new sqs.PurgeQueueCommand({ QueueUrl: jobs }));
  assert.deepEqual(await counts(jobs), [0, 0]);
  const empty = await send(new sqs.ReceiveMessageCommand({ QueueUrl: jobs, WaitTimeSeconds: 1 }));
  assert.equal((empty.Messages ?? []).length, 0, "purged");
  const inProgress = await expectError("PurgeQueueInProgress", () => send(new sqs.PurgeQueueCommand({ QueueUrl: jobs })));
  assert.ok(inProgress instanceof sqs.PurgeQueueInProgress);
  assert.equal(inProgress.$metadata.httpStatusCode, 403);

  // Redrive: a message received maxReceiveCount times lands in the dead-letter queue with
  // its attributes, and a move task brings it back.
  if (mode === "redrive") {
    const policy = JSON.stringify({ maxReceiveCount: 2, deadLetterTargetArn: dlqArn });
    await send(new sqs.SetQueueAttributesCommand({ QueueUrl: jobs, Attributes: { RedrivePolicy: policy } }));
    const sources = await send(new sqs.ListDeadLetterSourceQueuesCommand({ QueueUrl: dlq }));
    assert.deepEqual(sources.queueUrls, [jobs]);
    const poison = await send(new sqs.SendMessageCommand({ QueueUrl: jobs, MessageBody: "poison", MessageAttributes: attrs }));
    for (let i = 1; i <= 2; i++) {
      const [m] = await receiveUntil(jobs, (ms) => ms.length >= 1);
      assert.equal(m.Body, "poison");
      assert.equal(m.Attributes.ApproximateReceiveCount, String(i));
      await send(new sqs.ChangeMessageVisibilityCommand({ QueueUrl: jobs, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0 }));
    }
    const [dead] = await receiveUntil(dlq, (ms) => ms.length >= 1);
    assert.equal(dead.Body, "poison");
    assert.equal(dead.MD5OfMessageAttributes, poison.MD5OfMessageAttributes);
    assert.deepEqual(Buffer.from(dead.MessageAttributes.blob.BinaryValue), Buffer.from([0, 1, 2, 254, 255]));
    await send(new sqs.ChangeMessageVisibilityCommand({ QueueUrl: dlq, ReceiptHandle: dead.ReceiptHandle, VisibilityTimeout: 0 }));

    const task = await send(new sqs.StartMessageMoveTaskCommand({ SourceArn: dlqArn }));
    assert.ok(task.TaskHandle);
    const [moved] = await receiveUntil(jobs, (ms) => ms.length >= 1);
    assert.equal(moved.Body, "poison");
    assert.equal(moved.Attributes.ApproximateReceiveCount, "1", "a moved message is received afresh");
    assert.equal(moved.MD5OfMessageAttributes, poison.MD5OfMessageAttributes);
    await send(new sqs.DeleteMessageCommand({ QueueUrl: jobs, ReceiptHandle: moved.ReceiptHandle }));
    let status;
    for (let i = 0; i < 30 && status !== "COMPLETED"; i++) {
      const list = await send(new sqs.ListMessageMoveTasksCommand({ SourceArn: dlqArn }));
      status = list.Results[0].Status;
      if (status !== "COMPLETED") { // a long-poll of the empty dead-letter queue paces the next look
        await send(new sqs.ReceiveMessageCommand({ QueueUrl: dlq, WaitTimeSeconds: 1 }));
      }
    }
    assert.equal(status, "COMPLETED");
  }

  // A FIFO queue: each group in order, held while a message of it is in flight; a resend
  // within the deduplication window (here by content) answers the original and sends nothing.
  const fifo = (await send(new sqs.CreateQueueCommand({
    QueueName: "js-jobs.fifo", Attributes: { FifoQueue: "true", ContentBasedDeduplication: "true" },
  }))).QueueUrl;
  const fifoSent = await send(new sqs.SendMessageBatchCommand({
    QueueUrl: fifo, Entries: [["a", "a1"], ["b", "b1"], ["a", "a2"], ["b", "b2"]].map(([g, m]) => ({ Id: m, MessageBody: m, MessageGroupId: g })),
  }));
  assert.equal(fifoSent.Successful.length, 4, JSON.stringify(fifoSent.Failed));
  for (const e of fifoSent.Successful) assert.match(e.SequenceNumber, /^\d+$/);
  const resent = await send(new sqs.SendMessageCommand({ QueueUrl: fifo, MessageBody: "a1", MessageGroupId: "a" }));
  assert.equal(resent.MessageId, fifoSent.Successful.find((e) => e.Id === "a1").MessageId);
  await expectError("MissingParameter", () => send(new sqs.SendMessageCommand({ QueueUrl: fifo, MessageBody: "x" })));
  const fifoGot = await receiveUntil(fifo, (ms) => ms.length >= 4);
  assert.equal(fifoGot.length, 4, "the resend was not sent");
  for (const g of ["a", "b"]) {
    const ms = fifoGot.filter((m) => m.Attributes.MessageGroupId === g);
    assert.deepEqual(ms.map((m) => m.Body), [g + "1", g + "2"]);
    assert.ok(BigInt(ms[0].Attributes.SequenceNumber) < BigInt(ms[1].Attributes.SequenceNumber));
    assert.equal(ms[0].Attributes.MessageDeduplicationId, crypto.createHash("sha256").update(g + "1").digest("hex"));
  }
  await send(new sqs.SendMessageCommand({ QueueUrl: fifo, MessageBody: "a3", MessageGroupId: "a" }));
  const held = await send(new sqs.ReceiveMessageCommand({ QueueUrl: fifo, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
  assert.equal((held.Messages ?? []).length, 0, "a and b are in flight");
  const fifoDeleted = await send(new sqs.DeleteMessageBatchCommand({
    QueueUrl: fifo, Entries: fifoGot.map((m, i) => ({ Id: `f${i}`, ReceiptHandle: m.ReceiptHandle })),
  }));
  assert.equal(fifoDeleted.Successful.length, 4, JSON.stringify(fifoDeleted.Failed));
  const [a3] = await receiveUntil(fifo, (ms) => ms.length >= 1, { del: true });
  assert.equal(a3.Body, "a3");

  // Errors: the SDK's modeled exceptions, and the signatures it makes refused when wrong.
  await expectError("QueueDoesNotExist", () => send(new sqs.GetQueueUrlCommand({ QueueName: "js-nope" })));
  await expectError("ReceiptHandleIsInvalid", () => send(new sqs.DeleteMessageCommand({ QueueUrl: jobs, ReceiptHandle: "0:0:1" })));
  await expectError("InvalidParameterValue", () => send(new sqs.ReceiveMessageCommand({ QueueUrl: jobs, MaxNumberOfMessages: 11 })));
  await expectError("SignatureDoesNotMatch", () => client(accessKeyId, "not the secret").send(
    new sqs.SendMessageCommand({ QueueUrl: jobs, MessageBody: "x" })));
  await expectError("InvalidClientTokenId", () => client("AKIDUNKNOWN", "x").send(
    new sqs.SendMessageCommand({ QueueUrl: jobs, MessageBody: "x" })));

  // A deleted queue's name is refused for 60 s.
  await send(new sqs.DeleteQueueCommand({ QueueUrl: jobs }));
  await expectError("QueueDoesNotExist", () => send(new sqs.GetQueueUrlCommand({ QueueName: "js-jobs" })));
  const recently = await expectError("QueueDeletedRecently", () => send(new sqs.CreateQueueCommand({ QueueName: "js-jobs" })));
  assert.ok(recently instanceof sqs.QueueDeletedRecently);

  console.log(`OK js @aws-sdk/client-sqs ${sdkVersion}` + (mode ? ` (${mode})` : ""));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
