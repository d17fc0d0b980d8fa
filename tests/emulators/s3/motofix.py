"""motofix.py - the one moto 5.2.1 bug the S3 emulators patch, in the moto
process (tests/emulators/aws/ec2_harness.py runs moto in its own process;
faultproxy.py starts moto_server through `python3 motofix.py ARGS`, which
patches, then runs moto's server with ARGS).

moto checks an S3 request's SigV4 signature on its URL as werkzeug decoded
it (prefix=fm/), while SigV4, the SDKs and pbx encode every query value
(prefix=fm%2F, src/cloud/aws/sigv4.c): with signatures checked, every
listing with a '/' in its prefix was refused SignatureDoesNotMatch,
boto3's too.  The patch makes the canonical query of the values encoded
again, as S3 itself does.  tests/emulators/aws/test_imds.py shows moto
refusing without it (and will say when moto no longer needs it).
"""
import sys
import urllib.parse


def s3_signature_query_fix():
    import moto.iam.access_control as access_control
    cls = access_control.S3IAMRequest
    made = cls._create_aws_request

    def create(self):
        request = made(self)
        url = urllib.parse.urlsplit(request.url)
        if url.query:
            pairs = [p.partition("=") for p in url.query.split("&")]
            query = "&".join("%s=%s" % (urllib.parse.quote(urllib.parse.unquote(k), safe="-_.~"),
                                        urllib.parse.quote(urllib.parse.unquote(v), safe="-_.~"))
                             for k, _, v in pairs)
            request.url = urllib.parse.urlunsplit(url._replace(query=query))
        return request
    cls._create_aws_request = create


if __name__ == "__main__":
    s3_signature_query_fix()
    from moto.server import main
    main(sys.argv[1:])
