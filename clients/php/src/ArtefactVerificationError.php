<?php

declare(strict_types=1);

namespace Pont;

/** A consent artefact that does not verify: malformed, signed by no key of the set, tampered with, or expired. */
class ArtefactVerificationError extends PontError
{
}
