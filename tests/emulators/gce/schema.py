"""schema.py - the compute v1 request messages pbx and gcloud send, field by
field, and the JSON front end's checks: a name the message does not have, or
a value of the wrong JSON type, is refused with 400 before Compute Engine
looks at the request, as Google's front end does:

    Invalid JSON payload received. Unknown name "foo" at 'instance_resource':
    Cannot find field.

Types: "string", "bool", "int32", "int64" (JSON number or decimal string),
"uint64", "double", "any" (not modelled further), a message name, and
("list", T) / ("map", T).  Output-only fields are listed too: Compute Engine
accepts and ignores them.
"""

import re

from errors import invalid_payload

S, B, I32, I64, U64 = "string", "bool", "int32", "int64", "uint64"

MESSAGES = {
    "Instance": {
        "advancedMachineFeatures": "AdvancedMachineFeatures", "canIpForward": B,
        "confidentialInstanceConfig": "ConfidentialInstanceConfig", "cpuPlatform": S,
        "creationTimestamp": S, "deletionProtection": B, "description": S,
        "disks": ("list", "AttachedDisk"), "displayDevice": "DisplayDevice", "fingerprint": S,
        "guestAccelerators": ("list", "AcceleratorConfig"), "hostname": S, "id": U64,
        "instanceEncryptionKey": "CustomerEncryptionKey", "keyRevocationActionType": S,
        "kind": S, "labelFingerprint": S, "labels": ("map", S), "lastStartTimestamp": S,
        "lastStopTimestamp": S, "lastSuspendedTimestamp": S, "machineType": S,
        "metadata": "Metadata", "minCpuPlatform": S, "name": S,
        "networkInterfaces": ("list", "NetworkInterface"),
        "networkPerformanceConfig": "NetworkPerformanceConfig", "params": "InstanceParams",
        "privateIpv6GoogleAccessType": S, "reservationAffinity": "ReservationAffinity",
        "resourcePolicies": ("list", S), "resourceStatus": "any", "satisfiesPzi": B,
        "satisfiesPzs": B, "scheduling": "Scheduling", "selfLink": S,
        "serviceAccounts": ("list", "ServiceAccount"),
        "shieldedInstanceConfig": "ShieldedInstanceConfig",
        "shieldedInstanceIntegrityPolicy": "any", "sourceMachineImage": S,
        "sourceMachineImageEncryptionKey": "CustomerEncryptionKey", "startRestricted": B,
        "status": S, "statusMessage": S, "tags": "Tags", "zone": S,
    },
    "InstanceProperties": {
        "advancedMachineFeatures": "AdvancedMachineFeatures", "canIpForward": B,
        "confidentialInstanceConfig": "ConfidentialInstanceConfig", "description": S,
        "disks": ("list", "AttachedDisk"), "displayDevice": "DisplayDevice",
        "guestAccelerators": ("list", "AcceleratorConfig"), "keyRevocationActionType": S,
        "labels": ("map", S), "machineType": S, "metadata": "Metadata", "minCpuPlatform": S,
        "networkInterfaces": ("list", "NetworkInterface"),
        "networkPerformanceConfig": "NetworkPerformanceConfig",
        "privateIpv6GoogleAccessType": S, "reservationAffinity": "ReservationAffinity",
        "resourceManagerTags": ("map", S), "resourcePolicies": ("list", S),
        "scheduling": "Scheduling", "serviceAccounts": ("list", "ServiceAccount"),
        "shieldedInstanceConfig": "ShieldedInstanceConfig", "tags": "Tags",
    },
    "BulkInsertInstanceResource": {
        "count": I64, "instanceProperties": "InstanceProperties", "locationPolicy": "any",
        "minCount": I64, "namePattern": S,
        "perInstanceProperties": ("map", "PerInstanceProperties"),
        "sourceInstanceTemplate": S,
    },
    "PerInstanceProperties": {"name": S, "hostname": S},
    "AdvancedMachineFeatures": {
        "enableNestedVirtualization": B, "enableUefiNetworking": B, "threadsPerCore": I32,
        "visibleCoreCount": I32, "performanceMonitoringUnit": S, "turboMode": S,
    },
    "ConfidentialInstanceConfig": {"enableConfidentialCompute": B, "confidentialInstanceType": S},
    "DisplayDevice": {"enableDisplay": B},
    "ShieldedInstanceConfig": {"enableSecureBoot": B, "enableVtpm": B,
                               "enableIntegrityMonitoring": B},
    "ReservationAffinity": {"consumeReservationType": S, "key": S, "values": ("list", S)},
    "NetworkPerformanceConfig": {"totalEgressBandwidthTier": S},
    "InstanceParams": {"resourceManagerTags": ("map", S)},
    "Tags": {"items": ("list", S), "fingerprint": S},
    "Metadata": {"kind": S, "fingerprint": S, "items": ("list", "MetadataItem")},
    "MetadataItem": {"key": S, "value": S},
    "Scheduling": {
        "automaticRestart": B, "onHostMaintenance": S, "preemptible": B,
        "provisioningModel": S, "instanceTerminationAction": S,
        "nodeAffinities": ("list", "NodeAffinity"), "minNodeCpus": I32, "locationHint": S,
        "maxRunDuration": "Duration", "terminationTime": S,
        "localSsdRecoveryTimeout": "Duration", "onInstanceStopAction": "OnInstanceStopAction",
        "availabilityDomain": I32,
    },
    "NodeAffinity": {"key": S, "operator": S, "values": ("list", S)},
    "Duration": {"seconds": I64, "nanos": I32},
    "OnInstanceStopAction": {"discardLocalSsd": B},
    "ServiceAccount": {"email": S, "scopes": ("list", S)},
    "AcceleratorConfig": {"acceleratorType": S, "acceleratorCount": I32},
    "AttachedDisk": {
        "autoDelete": B, "boot": B, "deviceName": S, "diskEncryptionKey": "CustomerEncryptionKey",
        "diskSizeGb": I64, "forceAttach": B, "guestOsFeatures": ("list", "GuestOsFeature"),
        "index": I32, "initializeParams": "AttachedDiskInitializeParams", "interface": S,
        "kind": S, "licenses": ("list", S), "mode": S, "source": S, "type": S,
        "architecture": S, "savedState": S, "shieldedInstanceInitialState": "any",
    },
    "GuestOsFeature": {"type": S},
    "AttachedDiskInitializeParams": {
        "architecture": S, "description": S, "diskName": S, "diskSizeGb": I64, "diskType": S,
        "labels": ("map", S), "licenses": ("list", S), "onUpdateAction": S,
        "provisionedIops": I64, "provisionedThroughput": I64, "replicaZones": ("list", S),
        "resourceManagerTags": ("map", S), "resourcePolicies": ("list", S), "sourceImage": S,
        "sourceImageEncryptionKey": "CustomerEncryptionKey", "sourceSnapshot": S,
        "sourceSnapshotEncryptionKey": "CustomerEncryptionKey", "storagePool": S,
        "enableConfidentialCompute": B,
    },
    "CustomerEncryptionKey": {"rawKey": S, "rsaEncryptedKey": S, "kmsKeyName": S,
                              "kmsKeyServiceAccount": S, "sha256": S},
    "NetworkInterface": {
        "accessConfigs": ("list", "AccessConfig"), "aliasIpRanges": ("list", "AliasIpRange"),
        "fingerprint": S, "ipv6AccessConfigs": ("list", "AccessConfig"), "ipv6Address": S,
        "kind": S, "name": S, "network": S, "networkIP": S, "nicType": S, "queueCount": I32,
        "stackType": S, "subnetwork": S, "internalIpv6PrefixLength": I32,
        "networkAttachment": S, "ipv6AccessType": S,
    },
    "AliasIpRange": {"ipCidrRange": S, "subnetworkRangeName": S},
    "AccessConfig": {
        "kind": S, "name": S, "natIP": S, "networkTier": S, "publicPtrDomainName": S,
        "setPublicPtr": B, "type": S, "externalIpv6": S, "externalIpv6PrefixLength": I32,
        "securityPolicy": S,
    },
    "Firewall": {
        "allowed": ("list", "FirewallRule"), "creationTimestamp": S,
        "denied": ("list", "FirewallRule"), "description": S, "destinationRanges": ("list", S),
        "direction": S, "disabled": B, "id": U64, "kind": S, "logConfig": "FirewallLogConfig",
        "name": S, "network": S, "priority": I32, "selfLink": S, "sourceRanges": ("list", S),
        "sourceServiceAccounts": ("list", S), "sourceTags": ("list", S),
        "targetServiceAccounts": ("list", S), "targetTags": ("list", S),
    },
    "FirewallRule": {"IPProtocol": S, "ports": ("list", S)},
    # Router and its NAT (docs/gce-network.md).  BGP, interfaces and NAT
    # rules are not modelled further ("any").
    "Router": {
        "bgp": "any", "bgpPeers": ("list", "any"), "creationTimestamp": S, "description": S,
        "encryptedInterconnectRouter": B, "id": U64, "interfaces": ("list", "any"), "kind": S,
        "md5AuthenticationKeys": ("list", "any"), "name": S, "nats": ("list", "RouterNat"),
        "network": S, "region": S, "selfLink": S,
    },
    "RouterNat": {
        "autoNetworkTier": S, "drainNatIps": ("list", S), "enableDynamicPortAllocation": B,
        "enableEndpointIndependentMapping": B, "endpointTypes": ("list", S),
        "icmpIdleTimeoutSec": I32, "logConfig": "RouterNatLogConfig", "maxPortsPerVm": I32,
        "minPortsPerVm": I32, "name": S, "nat64Subnetworks": ("list", "any"),
        "natIpAllocateOption": S, "natIps": ("list", S), "rules": ("list", "any"),
        "sourceSubnetworkIpRangesToNat": S, "sourceSubnetworkIpRangesToNat64": S,
        "subnetworks": ("list", "RouterNatSubnetworkToNat"), "tcpEstablishedIdleTimeoutSec": I32,
        "tcpTimeWaitTimeoutSec": I32, "tcpTransitoryIdleTimeoutSec": I32, "type": S,
        "udpIdleTimeoutSec": I32,
    },
    "RouterNatLogConfig": {"enable": B, "filter": S},
    "RouterNatSubnetworkToNat": {"name": S, "secondaryIpRangeNames": ("list", S),
                                 "sourceIpRangesToNat": ("list", S)},
    "FirewallLogConfig": {"enable": B, "metadata": S},
    # images.insert (only sourceDisk is served; the other sources are
    # accepted by the front end and refused by images.py)
    "Image": {
        "architecture": S, "archiveSizeBytes": I64, "creationTimestamp": S,
        "deprecated": "any", "description": S, "diskSizeGb": I64, "enableConfidentialCompute": B,
        "family": S, "guestOsFeatures": ("list", "GuestOsFeature"), "id": U64,
        "imageEncryptionKey": "CustomerEncryptionKey", "kind": S, "labelFingerprint": S,
        "labels": ("map", S), "licenseCodes": ("list", I64), "licenses": ("list", S), "name": S,
        "rawDisk": "ImageRawDisk", "satisfiesPzi": B, "satisfiesPzs": B, "selfLink": S,
        "shieldedInstanceInitialState": "any", "sourceDisk": S,
        "sourceDiskEncryptionKey": "CustomerEncryptionKey", "sourceDiskId": S, "sourceImage": S,
        "sourceImageEncryptionKey": "CustomerEncryptionKey", "sourceImageId": S,
        "sourceSnapshot": S, "sourceSnapshotEncryptionKey": "CustomerEncryptionKey",
        "sourceSnapshotId": S, "sourceType": S, "status": S, "storageLocations": ("list", S),
    },
    "ImageRawDisk": {"containerType": S, "sha1Checksum": S, "source": S},
}

_TYPE_NAMES = {S: "TYPE_STRING", B: "TYPE_BOOL", I32: "TYPE_INT32", I64: "TYPE_INT64",
               U64: "TYPE_UINT64"}
_INT = re.compile(r"-?[0-9]+\Z")


def snake(name):
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def check(message, value, where):
    """Checks VALUE (parsed JSON) against MESSAGE; WHERE is the request field
    ('instance_resource').  Raises ApiError 400 at the first problem."""
    _check_message(message, value, where)


def _check_message(message, value, where):
    if not isinstance(value, dict):
        raise invalid_payload("Invalid value at '%s' (type.googleapis.com/google.cloud.compute.v1.%s), %s"
                              % (where, message, _show(value)))
    fields = MESSAGES[message]
    for key, v in value.items():
        if key not in fields:
            raise invalid_payload("Unknown name \"%s\" at '%s': Cannot find field." % (key, where))
        _check_value(fields[key], v, "%s.%s" % (where, snake(key)))


def _check_value(t, v, where):
    if v is None:
        return                      # JSON null: the field is unset
    if isinstance(t, tuple):
        kind, inner = t
        if kind == "list":
            if not isinstance(v, list):
                raise invalid_payload("Invalid value at '%s' (%s), %s"
                                      % (where, _TYPE_NAMES.get(inner, "TYPE_MESSAGE"), _show(v)))
            for i, item in enumerate(v):
                _check_value(inner, item, "%s[%d]" % (where, i))
        else:
            if not isinstance(v, dict):
                raise invalid_payload("Invalid value at '%s', %s" % (where, _show(v)))
            for k, item in v.items():
                _check_value(inner, item, "%s[%s]" % (where, k))
        return
    if t == "any":
        return
    if t in MESSAGES:
        _check_message(t, v, where)
        return
    ok = {
        S: isinstance(v, str),
        B: isinstance(v, bool),
        I32: _is_int(v, 32), I64: _is_int(v, 64), U64: _is_int(v, 64, unsigned=True),
        "double": isinstance(v, (int, float)) and not isinstance(v, bool),
    }[t]
    if not ok:
        raise invalid_payload("Invalid value at '%s' (%s), %s" % (where, _TYPE_NAMES.get(t, t), _show(v)))


def _is_int(v, bits, unsigned=False):
    if isinstance(v, bool):
        return False
    if isinstance(v, str):
        if not _INT.match(v):
            return False
        v = int(v)
    elif isinstance(v, float):
        if v != int(v):
            return False
        v = int(v)
    elif not isinstance(v, int):
        return False
    if unsigned:
        return 0 <= v < 2 ** bits
    return -2 ** (bits - 1) <= v < 2 ** (bits - 1)


def _show(v):
    import json
    return json.dumps(v) if not isinstance(v, str) else '"%s"' % v
