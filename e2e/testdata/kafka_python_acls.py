"""Create, describe and delete ACLs with kafka-python 2.0.2's admin client.

Creates a literal READ allow for User:alice on topic --topic and a
prefixed WRITE deny for User:* on "logs-", describes every topic ACL,
deletes alice's by a filter, and describes again. Prints one JSON object
with what each step returned; the Go test checks the numbers.
"""

import argparse
import json
import sys

from kafka import KafkaAdminClient
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType,
                         ACLResourcePatternType, ResourcePattern,
                         ResourcePatternFilter, ResourceType)


def describe(admin, result):
    acls, err = admin.describe_acls(ACLFilter(
        principal=None, host=None, operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY)))
    if err.errno != 0:
        result["errors"].append("describe_acls: %s" % err)
    return sorted("%s %s %s %s %s %s" % (a.principal, a.host, a.resource_pattern.resource_name,
                                         a.resource_pattern.pattern_type.name, a.operation.name,
                                         a.permission_type.name) for a in acls)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    args = ap.parse_args()
    result = {"errors": []}
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=30000)
    try:
        created = admin.create_acls([
            ACL(principal="User:alice", host="*", operation=ACLOperation.READ,
                permission_type=ACLPermissionType.ALLOW,
                resource_pattern=ResourcePattern(ResourceType.TOPIC, args.topic, ACLResourcePatternType.LITERAL)),
            ACL(principal="User:*", host="*", operation=ACLOperation.WRITE,
                permission_type=ACLPermissionType.DENY,
                resource_pattern=ResourcePattern(ResourceType.TOPIC, "logs-", ACLResourcePatternType.PREFIXED)),
        ])
        result["created"] = len(created["succeeded"])
        result["failed"] = [str(f) for f in created["failed"]]
        result["described"] = describe(admin, result)
        deleted = admin.delete_acls([ACLFilter(
            principal="User:alice", host=None, operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))])
        result["deleted"] = sum(len(matches) for _, matches, _ in deleted)
        result["remaining"] = describe(admin, result)
    except Exception as e:  # the test reads the verdict, not a traceback
        result["errors"].append("%s: %s" % (type(e).__name__, e))
    finally:
        admin.close()
    print(json.dumps(result))
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
