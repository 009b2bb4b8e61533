"""Instruction-like text: stored memory that addresses the agent reading it.

Memory is recalled as data (libs/core/contracts/framing.py), but a fact whose text is itself an
instruction ("ignore previous instructions …", chat-template role markup, a tool call, our own
recall delimiters) is worth labelling: it is stored unchanged, then labelled `instruction_like` in
every result and ranked below unflagged evidence. Deterministic and model-free.

Three families of rules run over the text folded (NFKC, invisible characters removed, lower
case), the same with look-alike letters and digits mapped to Latin ("ιgn0re" → "ignore"), and with
letter-by-letter spacing collapsed:
- markup: chat-template role and tool-call tokens, and our framing delimiters;
- injection phrases addressed to the reader, in English, German, French, Spanish, Italian,
  Portuguese, Russian, Chinese and Japanese: disregard earlier instructions, a new identity or
  mode, reveal the system prompt, act without telling the user, a note to the AI reading this;
- line-start role headers ("system:", "### instruction:").

Mentions of instructions in third person ("the runbook says to ignore the first alert", "the
README instructs users to run make test") do not match: a rule needs the reader addressed or the
earlier instructions themselves named as what to drop. Rates on the labelled set: docs/security.md.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Literal

from echo_memory.libs.core.secrets.normalise import collapsed, folded

InstructionFlag = Literal["instruction_like"]
INSTRUCTION_LIKE: InstructionFlag = "instruction_like"

# Look-alike characters an attacker swaps in to dodge a phrase match: Greek and Cyrillic letters
# that render as Latin ones, and the digits of leetspeak.
_LOOKALIKES = str.maketrans({
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s",
    "ԁ": "d", "ɡ": "g", "α": "a", "ε": "e", "ι": "i", "ο": "o", "ρ": "p", "υ": "u", "ν": "v", "κ": "k",
    "τ": "t", "0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "|": "l",
})

_EARLIER_EN = (r"(?:previous|prior|above|earlier|preceding|foregoing|former|original|initial|"
               r"system|safety|given|provided|developer)")
_RULES_EN = (r"(?:instructions?|prompts?|rules|directions|directives|guidelines|guidance|commands|"
             r"constraints|orders|programming|restrictions|policies|safeguards|guardrails|context|"
             r"messages|system prompt|training)")
_DROP_WORDS = "ignore|disregard|forget|override|bypass|ignoring|disregarding|forgetting|discard|abandon|drop|neglect"
_DROP_EN = rf"(?:{_DROP_WORDS})"

_PHRASES: tuple[tuple[str, str], ...] = (
    # English: drop the earlier instructions.
    ("disregard earlier instructions",
     rf"\b{_DROP_EN}\b[\s,]+(?:(?:all|any|every|each|of|the|your|my|these|those|that|this|everything)\s+){{0,3}}"
     rf"(?:{_EARLIER_EN}\s+)+(?:\w+\s+)?{_RULES_EN}\b"),
    ("disregard your instructions",
     rf"\b{_DROP_EN}\b\s+(?:all\s+|any\s+)?(?:of\s+)?your\s+(?:\w+\s+)?{_RULES_EN}\b"),
    ("disregard your instructions",
     rf"\b{_DROP_EN}\b\s+(?:all|any|every)\s+(?:of\s+)?(?:the\s+)?(?:instructions?|prompts?|directives|guidelines|"
     r"safety\s+\w+|restrictions|guardrails)\b"),
    ("disregard everything before",
     rf"\b{_DROP_EN}\b\s+(?:everything|anything|all)\s+(?:that\s+)?(?:(?:you\s+)?(?:were|have been|was)\s+)?"
     r"(?:said|told|written|above|before|previously|earlier|prior)"),
    ("disregard everything before",
     r"(?:^|[.!?:;,\n(\-]\s*|\b(?:please|kindly|just|now)\s+)(?:ignore|disregard|forget|set\s+aside)\s+"
     r"(?:(?:all|everything|anything|whatever)\s+)?(?:(?:of\s+)?(?:the\s+|that\s+)?(?:above|before|previous)|"
     r"(?:what(?:ever)?|everything|anything|all)\s+(?:that\s+)?(?:you\s+(?:were|have\s+been|got|received)|"
     r"(?:was|is|came|has\s+been)\s+(?:said|written|above|before|earlier)|came\s+before|precedes))"),
    ("disregard earlier instructions",
     rf"\b(?:do\s+not|don't|never|no\s+longer)\s+(?:follow|obey|listen\s+to|comply\s+with|adhere\s+to)\s+"
     rf"(?:any\s+(?:of\s+)?)?(?:your|the|those|these)\s+(?:{_EARLIER_EN}\s+)?{_RULES_EN}\b"),
    ("instructions revoked",
     rf"\b(?:your|the|all|any)\s+(?:{_EARLIER_EN}\s+)?(?:instructions?|system\s+prompt|prompts?|rules|guidelines|"
     rf"directives|orders)\s+(?:(?:that\s+)?you\s+(?:received|were\s+given|got|have)\s+(?:\w+\s+){{0,4}})?"
     r"(?:are|is|were|have\s+been|has\s+been)\s+(?:now\s+)?(?:void|cancell?ed|revoked|overridden|invalid|"
     r"obsolete|null|suspended|lifted|no\s+longer\s+(?:valid|in\s+effect|apply|applicable))"),
    ("new identity", r"\b(?:overwrite|replace|update|rewrite|reset)\s+your\s+(?:\w+\s+)?(?:instructions|system\s+prompt|"
                     r"rules|guidelines|programming|directives)\b"),
    ("new identity", r"\btreat\s+(?:this|the\s+following|these)\s+(?:\w+\s+)?as\s+(?:your\s+)?(?:new\s+)?"
                     r"(?:system\s+prompt|instructions|orders|directives)\b"),
    ("new identity", r"\byou\s+(?:now\s+)?have\s+a\s+new\s+(?:task|mission|goal|objective|purpose|role|job|"
                     r"assignment)\b"),
    ("new identity", r"\bnew\s+(?:system\s+prompt|persona|role|objective|mission)\s*[:\-–—]"),
    ("new identity", r"\b(?:system|admin|developer|security)\s+override\b\s*[:!\-–—]"),
    ("new identity", r"\byou\s+(?:now\s+)?work\s+for\s+me\b"),
    ("instructions revoked",
     r"\b(?:previous|prior|earlier|old|original|above|initial|system)\s+(?:instructions?|guidance|rules|directives|"
     r"prompts?|orders|guidelines)\s+(?:are|is|were|have\s+been|has\s+been)\s+(?:now\s+)?(?:void|cancell?ed|"
     r"revoked|overridden|invalid|obsolete|null|suspended|lifted|no\s+longer\s+(?:valid|in\s+effect|apply))"),
    ("instructions revoked",
     r"\byour\s+(?:instructions|rules|guidelines|orders|directives|system\s+prompt)\s+(?:have|has)\s+(?:been\s+)?"
     r"(?:changed|updated|replaced)"),
    ("new identity", r"\byou(?:'re|\s+are)\s+now\s+(?:an?|the|my)\s+\w+"),
    ("new identity", r"(?:^|[.!?;]\s+)(?:please\s+)?(?:act|behave|roleplay|role-play|pose)\s+as\b"),
    ("new identity", r"\byour\s+(?:top\s+|first\s+|main\s+|only\s+|new\s+)?priority\s+is\s+now\b"),
    ("new identity", r"\b(?:you\s+are|the\s+(?:assistant|agent|ai|model))\s+(?:is\s+)?(?:hereby|now)\s+"
                     r"(?:authori[sz]ed|allowed|permitted|instructed|required|ordered)\b"),
    ("new identity", r"\b(?:always|never)\s+(?:include|add|insert|append|mention|recommend|say|reply|respond|answer|"
                     r"output)\b.{0,60}\b(?:in|to)\s+(?:every|all|each|any)\s+(?:answers?|responses?|replies|"
                     r"reply|outputs?)\b"),
    ("behind the user's back", r"(?:^|[.!?;]\s+)(?:please\s+)?(?:reply|respond|say|tell|answer)\s+(?:to\s+)?the\s+user\s+"
                               r"(?:that|with)\b"),
    ("new identity", r"\b(?:use|call|invoke|with|using)\s+your\s+(?:\w+\s+)?(?:tool|tools|function|functions|shell|"
                     r"terminal|browser)\b"),
    ("new identity", r"\b(?:skip|disable|bypass|turn\s+off|ignore)\s+(?:the\s+|your\s+|all\s+)?(?:safety|content)\s+"
                     r"(?:checks?|filters?|guidelines|rules|guardrails|policies)\b"),
    ("reveal the prompt", r"\b(?:reveal|print|show|output|leak|disclose|dump|display|send|paste|cat)\s+(?:me\s+)?"
                          r"(?:the\s+)?contents?\s+of\s+(?:\.env|/etc/|~/|the\s+env|id_rsa|\.ssh|your\s+)"),
    ("addressed to the reading model",
     r"(?:^|[.!?;]\s+)(?:for|to)\s+(?:any|every|all|the)\s+(?:ai|llm|language\s+model|assistant|model|agent|chatbot)s?"
     r"(?:\s+reading\s+this)?\s*:"),
    ("addressed to the reading model",
     r"(?:^|[.!?;]\s+)(?:hi|hello|hey|dear|yo)\s+(?:there\s+)?(?:ai|assistant|llm|model|bot|agent|chatgpt|claude)\s*[,!:]"),
    ("instructions superseded",
     r"\b(?:these|this|the following|new)\s+(?:\w+\s+)?(?:instructions?|rules|orders)\s+"
     r"(?:supersede|override|replace|take precedence over)"),
    ("stop following", rf"\b(?:stop|quit|cease)\s+(?:following|obeying|using)\s+(?:all\s+)?(?:your|the|any)\s+"
                       rf"(?:{_EARLIER_EN}\s+)?{_RULES_EN}\b"),
    # English: a new identity, mode or task for the reader.
    ("new identity", r"\byou\s+are\s+now\s+(?:an?\s+|the\s+|my\s+|in\s+)?(?:\w+\s+)?(?:ai|assistant|model|bot|"
                     r"chatbot|llm|agent|hacker|persona|character|dan|unrestricted|unfiltered|uncensored|jailbroken|"
                     r"evil|free|rogue|mode|version)\b"),
    ("new identity", r"\byou\s+are\s+no\s+longer\s+(?:bound|restricted|limited|required|an?\s+(?:ai|assistant|"
                     r"language\s+model)|claude|chatgpt|gpt|subject)\b"),
    ("new identity", r"\bfrom\s+now\s+on\b[\s,]+you\s+(?:are|will|must|shall|should|act|respond|answer|reply|only|"
                     r"have\s+to|work\s+for|obey)\b"),
    ("new identity", r"\b(?:pretend|imagine)\s+(?:that\s+)?(?:you\s+are|to\s+be|you're)\b"),
    ("new identity", r"\b(?:act|behave|respond)\s+as\s+(?:if\s+you\s+(?:are|were)|an?\s+(?:unrestricted|unfiltered|"
                     r"uncensored|evil|rogue|jailbroken))"),
    ("new identity", r"\byour\s+(?:new|real|true|actual|only)\s+(?:instructions?|task|goal|objective|purpose|"
                     r"role|job|mission)\s+(?:is|are|now)\b"),
    ("new identity", r"\b(?:enable|enter|activate|switch\s+(?:to|into)|turn\s+on)\s+(?:the\s+)?(?:developer|dan|"
                     r"jailbreak|god|unrestricted|debug|admin|sudo)\s+mode\b"),
    ("new identity", r"\bdo\s+anything\s+now\b"),
    ("new identity", r"\bnew\s+(?:system\s+)?(?:instructions?|directives?|rules)\s*(?:for\s+you\s*)?[:\-–—]"),
    ("new identity", r"\byou\s+(?:must|will|shall|should)\s+(?:now\s+)?(?:obey|comply\s+with|follow)\s+"
                     r"(?:me|my|these|the\s+following|only|this)\b"),
    ("new identity", r"\b(?:respond|reply|answer)\s+only\s+(?:with|in)\b.{0,40}\bfrom\s+now\b"),
    # English: the reader's hidden context, or acting behind the user's back.
    ("reveal the prompt",
     r"\b(?:reveal|print|show|output|repeat|leak|disclose|dump|display|recite|tell\s+me|give\s+me|"
     r"send\s+me|paste)\s+(?:me\s+|us\s+)?(?:(?:the\s+)?(?:text|contents?|words)\s+of\s+)?(?:(?:your\s+|all\s+(?:of\s+)?your\s+)(?:full\s+|entire\s+|exact\s+|"
     r"hidden\s+|initial\s+|original\s+|secret\s+)*(?:system\s+prompt|system\s+message|instructions|"
     r"initial\s+prompt|prompt|api\s+keys?|credentials|secrets|context\s+window|tools?|rules)|the\s+(?:full\s+|"
     r"entire\s+|exact\s+|hidden\s+|secret\s+)*(?:system\s+prompt|system\s+message|initial\s+prompt|"
     r"hidden\s+instructions|developer\s+message))\b"),
    ("behind the user's back",
     r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this|it)\s+to|let|reveal\s+(?:this|it)\s+to|"
     r"show\s+(?:this|it)\s+to)\s+(?:the\s+)?(?:user|human)\b"),
    ("behind the user's back",
     r"\b(?:secretly|covertly)\s+(?:send|forward|exfiltrate|upload|email|post|run|execute|"
     r"delete|call|transfer|copy|include|append|add|insert|write)\b"),
    ("behind the user's back",
     r"\b(?:send|forward|exfiltrate|upload|email|post)\s+(?:all\s+)?(?:the\s+|your\s+)?(?:conversation|chat\s+history|"
     r"system\s+prompt|api\s+keys?|credentials|secrets|env(?:ironment)?\s+variables)\s+to\s+(?:https?://|\S+@|"
     r"this|the\s+following)"),
    # English: a message to whatever model reads the memory.
    ("addressed to the reading model",
     r"\b(?:note|message|attention|instructions?|reminder|notice|warning|important)\s+(?:to|for)\s+"
     r"(?:any\s+|the\s+|all\s+|every\s+)?(?:(?:ai|a\.i\.|assistant|llm|language\s+model|model|chatbot)s?"
     r"(?:\s+(?:agents?|assistants?))?(?:\s+(?:reading|processing|that\s+reads|who\s+reads|seeing)(?:\s+this)?)?|"
     r"agents?\s+(?:reading|processing|that\s+reads|who\s+reads|seeing)(?:\s+this)?)\s*[:,!\-–—]"),
    ("addressed to the reading model",
     r"\b(?:if|when|whenever)\s+you\s+are\s+an?\s+(?:ai|a\.i\.|llm|language\s+model|assistant|agent|model|"
     r"chatbot|bot)\b"),
    ("addressed to the reading model",
     r"\b(?:any|every|each|all|the|an?|whichever|whatever)\s+(?:ai|a\.i\.|llm|language\s+model|assistant|agent|model|"
     r"chatbot|bot)s?\s+(?:(?:agent|assistant|model)s?\s+)?(?:that\s+|who\s+|which\s+)?(?:reads?|reading|processe?s|"
     r"processing|retrieves?|retrieving|recalls?|recalling|sees?|seeing|finds?|finding|receives?|receiving)\s+this\b"),
    ("addressed to the reading model",
     r"\b(?:(?:when|once|as\s+soon\s+as|after|if|whenever)\s+you\s+(?:see|read|retrieve|recall|process|encounter|find|"
     r"receive)|upon\s+(?:reading|seeing|retrieving|recalling|processing)|on\s+reading)\s+this\s+(?:entry|memory|note|"
     r"message|fact|record|text|line)\b"),
    ("addressed to the reading model",
     r"\b(?:upon|on|after)\s+(?:reading|seeing|retrieving|recalling|processing)\s+this\s*[,:]"),
    ("addressed to the reading model",
     r"(?:^|[.!?;]\s+)(?:hey\s+|dear\s+)?(?:ai|assistant|llm|claude|chatgpt|gpt|model|bot|agent)\s*[,—–-]\s*(?:please\s+)?"
     r"(?:you|ignore|disregard|forget|discard|stop|do|don't|never|always|now|from|delete|send|run|execute|reveal|"
     r"print|listen|your|new|previous)\b"),
    ("addressed to the reading model",
     r"\b(?:instructions?|orders|commands|directives)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?(?:ai|assistant|"
     r"agent|model|llm|bot)s?\s*:"),
    ("behind the user's back",
     r"\b(?:whatever|no\s+matter\s+what|regardless\s+of\s+what)\s+the\s+user\s+(?:asks|says|wants|writes|"
     r"requests)(?:\s+\w+)?[\s,]+(?:answer|say|reply|respond|tell|claim|insist)"),
    ("new identity",
     r"\b(?:you\s+(?:should|must|will|shall|are\s+to)\s+now|now\s+you\s+(?:must|should|will|shall))\s+(?:act|behave|"
     r"respond|pretend|become|ignore|obey|run|execute|reveal|send|delete|forget|answer|approve)\b"),
    ("new identity", r"\b(?:act|behave|operate)\s+as\s+(?:the\s+)?(?:root|an?\s+admin(?:istrator)?|administrator|"
                     r"superuser|sudo|the\s+system|system\s+administrator|a\s+shell|a\s+terminal)\b"),
    ("instructions superseded",
     r"\b(?:overrides?|supersedes?|takes?\s+precedence\s+over|(?:has|have)\s+(?:top\s+|absolute\s+|the\s+highest\s+)?"
     r"priority\s+over)\s+(?:any|all|every|everything|anything)\s+(?:\w+\s+)?(?:prior|previous|earlier|else|other|"
     r"guidance|instructions?|rules)"),
    ("disregard earlier instructions",
     rf"\b(?:{_DROP_WORDS}|erase|clear)\s+(?:the|this|our|your|all)\s+(?:previous\s+|prior\s+|earlier\s+)?"
     r"(?:conversation|context|chat|messages|history|dialogue)\s+(?:so\s+far|above|until\s+now|up\s+to\s+(?:now|here))"),
    ("disregard earlier instructions",
     r"\bpretend\s+(?:that\s+)?(?:the\s+|all\s+|your\s+)?(?:previous|prior|earlier|above|preceding)\s+(?:messages|"
     r"instructions|conversation|prompts?|rules)\s+(?:never\s+(?:happened|existed)|(?:do|did)\s*(?:n't|\s+not)\s+(?:exist|happen))"),
    ("addressed to the reading model",
     r"\b(?:as|since)\s+an?\s+(?:ai|llm|language\s+model|assistant)\s+(?:reading|processing|recalling)\s+this\b"),
    ("addressed to the reading model",
     r"\b(?:hey|dear|attention|listen(?:\s+up)?)[\s,]+(?:ai|assistant|llm|chatgpt|claude|gpt|gemini|copilot|"
     r"agent|model|bot)\b\s*[,:!]"),
    # German
    ("disregard earlier instructions",
     r"\b(?:ignorier(?:e|en|t)?|vergiss|vergessen|missacht(?:e|en)|verwirf|überspring(?:e)?)\b\s+"
     r"(?:sie\s+)?(?:(?:alle|die|deine|ihre|sämtliche|jegliche|bitte|der|den)\s+){0,3}"
     r"(?:vorherigen|bisherigen|vorigen|obigen|früheren|vorangegangenen|vorangehenden|alten|ursprünglichen|"
     r"gegebenen|system)\w*\s*(?:anweisungen|instruktionen|befehle|regeln|anordnungen|vorgaben|richtlinien|"
     r"prompts?|eingaben)"),
    ("disregard earlier instructions",
     r"\b(?:alle\s+|die\s+)?(?:vorherigen|bisherigen|vorigen|obigen|früheren|vorangegangenen)\s+"
     r"(?:anweisungen|instruktionen|befehle|regeln|vorgaben)\s+(?:sind\s+)?(?:ignorieren|vergessen|missachten|"
     r"ungültig|aufgehoben|hinfällig)"),
    ("disregard your instructions",
     r"\b(?:ignorier(?:e|en)?|vergiss|vergessen|missachte)\b\s+(?:sie\s+)?(?:alle\s+)?(?:deine|ihre)\s+"
     r"(?:anweisungen|instruktionen|befehle|regeln|vorgaben|richtlinien)"),
    ("disregard everything before",
     r"\b(?:vergiss|vergessen\s+sie|ignoriere|ignorieren\s+sie)[\s,]+(?:alles[\s,]+)?was\s+(?:\w+\s+){0,3}"
     r"(?:vorher|zuvor|oben|bisher|davor)"),
    ("disregard everything before",
     r"\b(?:vergiss|vergessen\s+sie|ignoriere|ignorieren\s+sie)\s+(?:einfach\s+)?alles[\s,]+(?:was|das)\s+"
     r"(?:dir|ihnen|du|sie)\s+(?:\w+\s+){0,3}(?:gesagt|geschrieben|aufgetragen|befohlen|mitgeteilt|gegeben)"),
    ("new identity", r"\b(?:du\s+bist|sie\s+sind)\s+(?:jetzt|nun|ab\s+sofort|ab\s+jetzt|von\s+nun\s+an)\b"),
    ("new identity", r"\b(?:ab\s+(?:jetzt|sofort)|von\s+nun\s+an)\b[\s,]+(?:bist|wirst|musst|sollst|antwortest|"
                     r"gibst|sind|werden|müssen)\s+(?:du|sie)\b"),
    ("new identity", r"\b(?:befolge|folge|gehorche|befolgen\s+sie)\s+(?:ab\s+sofort|ab\s+jetzt|von\s+nun\s+an|nur\s+noch)"),
    ("new identity", r"\bneue\s+(?:system)?(?:anweisungen|instruktionen|befehle|regeln)\s*[:\-–—]"),
    ("reveal the prompt", r"\b(?:gib|zeig|zeige|verrate|nenne|wiederhole)\s+(?:mir\s+)?(?:deinen|den|deine|die)\s+"
                          r"(?:system[-\s]?prompt|systemanweisungen|anweisungen)"),
    ("behind the user's back", r"\bohne\s+(?:dass\s+)?(?:es\s+)?(?:den|der|die)\s+(?:benutzer|nutzer|anwender)\w*\s+"
                               r"(?:zu\s+)?(?:informieren|sagen|merkt|erfährt|bemerkt|davon\s+erfährt)"),
    ("addressed to the reading model",
     r"\b(?:hinweis|nachricht|achtung|anweisung)\s+(?:an|für)\s+(?:die|den|jede|jeden|alle)?\s*"
     r"(?:ki|assistent(?:en)?|sprachmodell|modell|agent(?:en)?|llm)\b\s*[:,!]"),
    # French
    ("disregard earlier instructions",
     r"\b(?:ignore[zs]?|ignorer|oublie[zs]?|oublier|ne\s+tiens?\s+pas\s+compte\s+d|ne\s+tenez\s+pas\s+compte\s+d|"
     r"fais\s+abstraction\s+d|faites\s+abstraction\s+d|néglige[zs]?)\w*\s*'?\s*(?:(?:toutes|tous|les|tes|vos|des|"
     r"ces)\s+){0,3}(?:instructions|consignes|directives|règles|ordres|indications|commandes)\s+"
     r"(?:(?:qui\s+)?(?:précédentes|précédents|antérieures|ci-dessus|initiales|d'avant|du\s+système|système|"
     r"données|reçues|d'origine|originales|passées))"),
    ("disregard earlier instructions",
     r"\b(?:ignore[zs]?|ignorer|oublie[zs]?|oublier)\s+(?:tout\s+)?(?:ce\s+qui\s+(?:précède|a\s+été\s+dit)|"
     r"tout\s+ce\s+qu'on\s+t'a\s+dit)"),
    ("disregard everything before",
     r"\b(?:ignore[zs]?|ignorer|oublie[zs]?|oublier)\s+tout\s+ce\s+(?:qu'on|que\s+l'on|qui)\s+"
     r"(?:t'|vous\s+|te\s+|t’)?(?:a|ont|avait)\s+(?:été\s+)?(?:dit|écrit|demandé|donné|précède)"),
    ("disregard your instructions",
     r"\b(?:ignore[zs]?|ignorer|oublie[zs]?|oublier)\s+(?:toutes\s+)?(?:tes|vos)\s+(?:instructions|consignes|"
     r"directives|règles)"),
    ("new identity", r"\b(?:tu\s+es|vous\s+êtes)\s+(?:maintenant|désormais|dorénavant|à\s+présent)\b"),
    ("new identity", r"\b(?:à\s+partir\s+de\s+maintenant|désormais|dorénavant|dès\s+maintenant)\b[\s,]+"
                     r"(?:tu|vous)\s+(?:es|êtes|dois|devez|vas|allez|réponds|répondez|agis|agissez)\b"),
    ("new identity", r"\bnouvelles\s+(?:instructions|consignes|directives|règles)\s*(?:système\s*)?[:\-–—]"),
    ("reveal the prompt", r"\b(?:révèle|révélez|affiche|affichez|montre|montrez|donne|donnez|répète|répétez)"
                          r"[\s-]+(?:moi\s+)?(?:ton|votre|le|tes|vos)\s+(?:prompt|invite|instructions|consignes)"
                          r"(?:\s+(?:système|systeme|initial|initiales))?"),
    ("behind the user's back", r"\bsans\s+(?:le\s+dire|prévenir|informer|en\s+informer|en\s+parler)\s+"
                               r"(?:à\s+)?(?:l'|l’|le\s+|la\s+)?(?:utilisateur|utilisatrice|usager)"),
    ("addressed to the reading model",
     r"\b(?:note|message|attention|instruction)\s+(?:à|pour)\s+(?:l'|l’|le\s+|la\s+|tout\s+|toute\s+)?"
     r"(?:ia|assistant|modèle|agent|llm)\b\s*[:,!]"),
    # Spanish
    ("disregard earlier instructions",
     r"\b(?:ignora|ignorá|ignore|ignoren|ignorar|olvida|olvidá|olvide|olviden|olvidar|descarta|descartá|descarte|"
     r"omite|omita|"
     r"haz\s+caso\s+omiso\s+de|haga\s+caso\s+omiso\s+de|no\s+hagas\s+caso\s+de)\s+(?:(?:todas|todos|las|tus|sus|"
     r"los|estas|de)\s+){0,3}(?:instrucciones|indicaciones|reglas|órdenes|directrices|directivas|normas|"
     r"consignas|comandos)\s+(?:anteriores|previas|de\s+arriba|de\s+antes|iniciales|originales|del\s+sistema|"
     r"recibidas|dadas|antiguas)"),
    ("disregard earlier instructions",
     r"\b(?:ignora|ignore|olvida|olvide|olvidar|ignorar)\s+(?:todo\s+)?(?:lo\s+(?:anterior|que\s+te\s+dijeron|"
     r"dicho)|todo\s+lo\s+de\s+arriba)"),
    ("disregard your instructions",
     r"\b(?:ignora|ignore|olvida|olvide|descarta)\s+(?:todas\s+)?(?:tus|sus)\s+(?:instrucciones|indicaciones|"
     r"reglas|órdenes|directrices)"),
    ("new identity", r"\b(?:ahora\s+eres|ahora\s+(?:usted\s+)?es\s+un|(?:tú|tu)\s+eres\s+ahora|ya\s+no\s+eres)\b"),
    ("new identity", r"\b(?:a\s+partir\s+de\s+ahora|desde\s+ahora|de\s+ahora\s+en\s+adelante)\b[\s,]+"
                     r"(?:(?:tú|tu|usted)\s+)?(?:eres|debes|vas\s+a|responderás|actuarás|serás|es|debe|"
                     r"responde|actúa)\b"),
    ("new identity", r"\bnuevas\s+(?:instrucciones|indicaciones|reglas|órdenes)\s*(?:del\s+sistema\s*)?[:\-–—]"),
    ("reveal the prompt", r"\b(?:revela|revele|muestra|muestre|muéstrame|dime|repite|imprime)\s+(?:me\s+)?"
                          r"(?:tu|su|el|las|tus)\s+(?:prompt|instrucciones|indicaciones)(?:\s+del\s+sistema|"
                          r"\s+de\s+sistema|\s+iniciales|\s+ocultas)?"),
    ("behind the user's back", r"\bsin\s+(?:decírselo|decirle|avisar|informar|que\s+lo\s+sepa)\s+(?:nada\s+)?"
                               r"(?:al|a\s+la)\s+usuari[oa]"),
    ("addressed to the reading model",
     r"\b(?:nota|mensaje|atención|instrucción)\s+(?:para|a)\s+(?:la|el|cualquier|toda)?\s*(?:ia|asistente|modelo|"
     r"agente|llm)\b\s*[:,!]"),
    # Italian, Portuguese, Russian: the commonest phrasing only.
    ("disregard earlier instructions",
     r"\b(?:ignora|ignori|dimentica|dimentichi)\s+(?:tutte\s+)?(?:le\s+)?(?:istruzioni|indicazioni|regole)\s+"
     r"(?:precedenti|di\s+prima|iniziali)"),
    ("disregard earlier instructions",
     r"\b(?:ignore|ignora|esqueça|esqueca|desconsidere)\s+(?:todas\s+)?(?:as\s+)?(?:instruções|instrucoes|"
     r"orientações|regras)\s+(?:anteriores|prévias|acima|iniciais)"),
    ("disregard earlier instructions",
     r"(?:игнорируй|игнорируйте|забудь|забудьте|проигнорируй)\s+(?:все\s+)?(?:предыдущие|прошлые|"
     r"предшествующие|прежние|свои|твои)\s+(?:инструкции|указания|правила|команды)"),
    ("new identity", r"\b(?:ora\s+sei|adesso\s+sei|agora\s+você\s+é|a\s+partir\s+de\s+agora,?\s+você)\b"),
    ("new identity", r"(?:теперь\s+ты|отныне\s+ты|с\s+этого\s+момента\s+ты)"),
    # Chinese
    ("disregard earlier instructions",
     r"(?:忽略|无视|忽视|忘记|忘掉|不要理会|不要管|别管|丢弃|抛开|放弃|跳过|無視|忘記|不要理睬)"
     r"(?:掉)?(?:你)?(?:之前|以前|先前|上面|上述|前面|此前|早先|原来|原先|原有|所有|全部|一切|上文|以上|系统)"
     r".{0,8}?(?:指令|指示|说明|說明|规则|規則|提示|要求|命令|设定|設定|约束|限制|内容|对话)"),
    ("disregard earlier instructions",
     r"(?:忽略|无视|忽视|忘记|忘掉|無視|忘記|不要遵守|不要遵循|别管|不再遵守)(?!了)[^。.!！?？]{0,12}"
     r"(?:指令|指示|规则|規則|规定|要求|提示词|系统提示|设定|設定|命令)"),
    ("disregard earlier instructions",
     r"把(?:上面|之前|以上|前面|先前|此前|所有)的?(?:内容|指令|指示|规则|对话|话|设定|要求)[^。.!！]{0,6}"
     r"(?:忘掉|忘记|忽略|无视|丢掉|抛开)"),
    ("new identity", r"(?:按|照)我说的(?:做|办|去做)"),
    ("disregard your instructions",
     r"(?:忽略|无视|忽视|忘记|忘掉|無視|忘記)(?:你的|您的)(?:所有)?(?:指令|指示|规则|規則|提示词?|设定|限制)"),
    ("new identity", r"(?:你|您)现在(?:是|扮演|开始|进入|必须|要|只能)"),
    ("new identity", r"(?:你|您)現在(?:是|扮演|開始|進入|必須)"),
    ("new identity", r"从现在(?:开始|起)[，,\s]*(?:你|您)"),
    ("new identity", r"從現在(?:開始|起)[，,\s]*(?:你|您)"),
    ("new identity", r"新的?(?:系统)?(?:指令|指示|规则)\s*[:：]"),
    ("new identity", r"(?:开发者|開發者|越狱|越獄|无限制|無限制)模式"),
    ("reveal the prompt", r"(?:输出|显示|泄露|告诉我|打印|重复|透露|展示|給我|给我)(?:你的|您的|一下)?(?:完整的?)?"
                          r"(?:系统提示|系統提示|系统指令|初始提示|隐藏指令|提示词)"),
    ("behind the user's back", r"(?:不要|别|不得|切勿)(?:告诉|通知|提醒|让)(?:用户|使用者|用戶)"),
    ("reveal the prompt", r"(?:你的|您的)?(?:系统提示|系統提示|系统指令|提示词|初始提示)[^。.!！]{0,6}"
                          r"(?:输出|显示|告诉|打印|发给|泄露|透露)"),
    ("behind the user's back", r"(?:忽略|无视|不要理会)(?:用户|使用者|用戶)的?.{0,4}(?:问题|请求|消息|指令)"),
    ("new identity", r"只(?:回复|回答|输出|返回)[“\"「『]"),
    ("addressed to the reading model", r"(?:读到|看到|读取|讀到)(?:这条|此条|本条|這條)(?:记忆|消息|内容|記憶)的?"
                                       r"(?:ai|助手|模型|智能体)"),
    ("addressed to the reading model",
     r"(?:致|给|給)(?:所有|任何)?(?:阅读此|读到这|讀到這)?.{0,4}(?:ai|人工智能|助手|模型|智能体).{0,3}[:：，,！!]"),
    ("addressed to the reading model", r"(?:如果|若)(?:你|您)是(?:一个)?(?:ai|人工智能|助手|语言模型|大模型|智能体)"),
    # Japanese
    ("disregard earlier instructions",
     r"(?:以前|前|上記|これまで|先|今まで|上|前述|最初|元|既存|すべて|全て|システム|先ほど|さっき|直前)の?(?:すべての|全ての)?"
     r"(?:指示|命令|ルール|指令|プロンプト|設定|制約|説明)(?:を|は)?(?:すべて|全て|全部)?(?:無視|忘れ|破棄|放棄)"),
    ("disregard your instructions", r"(?:あなた|君)の(?:指示|命令|ルール|設定|制約)(?:を|は)(?:すべて|全て)?(?:無視|忘れ)"),
    ("new identity", r"(?:あなた|君|お前)は(?:今から|これから|今後|もう)"),
    ("new identity", r"(?:今から|これから(?:は)?|今後は?|これ以降|以後|以降)[、,\s]*(?:あなた|君|お前)は"),
    ("new identity", r"新しい(?:指示|命令|ルール)\s*[:：]"),
    ("new identity", r"(?:開発者|脱獄|制限なし)モード"),
    ("reveal the prompt", r"(?:システムプロンプト|初期プロンプト|隠された指示|あなたの指示)を(?:すべて|全て)?"
                          r"(?:表示|出力|教え|見せ|明かし|繰り返)"),
    ("behind the user's back", r"(?:ユーザー|利用者)に(?:は)?(?:知らせ|伝え|言わ|教え)(?:ず|ないで)"),
    ("new identity", r"と(?:答え|返答|回答|返信)(?:ること|なさい|てください|ろ|よ)"),
    ("addressed to the reading model", r"(?:この|本)(?:記憶|メモ|メッセージ|文章|エントリ)を(?:読んだ|読む|見た|処理する)"
                                       r"(?:ai|エージェント|アシスタント|モデル)"),
    ("addressed to the reading model", r"(?:ai|aiアシスタント|アシスタント|言語モデル|エージェント)(?:へ|に)の?"
                                       r"(?:注意|メッセージ|指示|お知らせ)\s*[:：]"),
    ("addressed to the reading model", r"(?:もし)?(?:あなた|君)が(?:ai|言語モデル|アシスタント|エージェント)(?:なら|であれば)"),
)

# Chat-template role tokens, tool-call markup and our own delimiters: no fact has a reason to
# carry them, and a model reading them may take what follows as a turn of its conversation.
_MARKUP: tuple[tuple[str, str], ...] = (
    ("role markup", r"<\|(?:im_start|im_end|im_sep|system|user|assistant|end|endoftext|eot_id|start_header_id|"
                    r"end_header_id|begin_of_text|tool|ipython|channel|message|start|return|call|constrain)\|>"),
    ("role markup", r"\[/?inst\]|<</?sys>>|<\s*/?\s*(?:start_of_turn|end_of_turn)\s*>"),
    # Not <assistant> or <human>: chat transcripts label their speakers that way ("<Assistant>: …").
    ("role markup", r"<\s*/?\s*(?:system|system_prompt|sys|developer)\s*>"),
    ("role markup", r"[\"']role[\"']\s*:\s*[\"'](?:system|assistant|developer|tool|function)[\"']"),
    ("role markup", r"(?:^|\n)\s*(?:#{1,4}\s*)?(?:system|system\s+prompt|system\s+message|developer\s+message)\s*:\s*"
                    r"(?:you|your|ignore|disregard|from\s+now|the\s+assistant|always|never|do\s+not|act|respond|"
                    r"new\s+instructions|override)\b"),
    ("role markup", r"(?:^|\n)\s*#{2,4}\s*(?:instruction|instructions|system|response)\s*:?\s*(?:\n|$)"),
    ("role markup", r"(?:^|\n\s*\n)\s*(?:human|assistant)\s*:\s*\S"),
    ("tool-call markup", r"<\s*/?\s*(?:tool_call|tool_calls|tool_use|tool_result|function_call|function_calls|"
                         r"function_results|invoke|antml:invoke|antml:function_calls|parameter\s+name|tool_response|"
                         r"tool_code|execute_tool)\b[^>]*>"),
    ("tool-call markup", r"[\"'](?:tool_calls|function_call)[\"']\s*:\s*[\[{]"),
    ("framing delimiter", r"<\s*/?\s*echo-memory-recall\b[^>]*>"),
)

# Letter-by-letter spacing collapses to one run without spaces ("ignoreallpreviousinstructions").
_COMPACT = re.compile(r"(?:ignore|disregard|forget|override)(?:all|any)?(?:of)?(?:the|your)?(?:previous|prior|above|"
                      r"earlier|preceding|system)(?:instructions?|rules|prompts?|directions|guidelines)")

# Bracketed role tags, matched on the text as written: "[SYSTEM]" addresses the model, "[system]"
# is a log line's prefix.
_CASED = (("role markup", re.compile(r"\[(?:SYSTEM|SYS|ADMIN|DEVELOPER|SYSTEM MESSAGE|SYSTEM PROMPT|SYSTEM OVERRIDE)\]")),)

_META = set("\\()[]{}.?*+|^$")


def _group_end(pattern: str, start: int) -> int:
    """The index of the parenthesis closing the group that opens at `start`."""
    depth, i = 0, start
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i = _class_end(pattern, i)
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unbalanced group in {pattern!r}")


def _class_end(pattern: str, start: int) -> int:
    i = start + 1
    while pattern[i] != "]" or i == start + 1:
        i += 2 if pattern[i] == "\\" else 1
    return i


def _quantifier(pattern: str, i: int) -> tuple[int, bool]:
    """(index after the quantifier at `i`, whether it allows zero repetitions)."""
    if i < len(pattern) and pattern[i] in "?*+":
        end = i + 1 + (i + 1 < len(pattern) and pattern[i + 1] == "?")
        return end, pattern[i] != "+"
    if i < len(pattern) and pattern[i] == "{":
        close = pattern.index("}", i)
        return close + 1, pattern[i + 1:close].split(",")[0] in ("", "0")
    return i, False


def _alternatives(body: str) -> list[str]:
    parts, depth, start, i = [], 0, 0, 0
    while i < len(body):
        char = body[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i = _class_end(body, i)
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(body[start:i])
            start = i + 1
        i += 1
    return [*parts, body[start:]]


def _literal_prefix(text: str) -> str:
    end = 0
    while end < len(text) and text[end] not in _META:
        end += 1
    if end < len(text) and text[end] in "?*{":
        end -= 1  # that character is optional
    return text[:end]


def anchors(pattern: str) -> tuple[tuple[str, ...], ...]:
    """Groups of literal strings such that any match of `pattern` contains one string of every group.

    Read from the pattern's required top-level elements that are a literal or a group of literal
    alternatives (optional and non-literal elements are passed over, which is always safe), so a
    rule is not run on a text missing one of its groups: a 20k-character turn is checked in
    milliseconds instead of a second. Necessary, never sufficient; empty when nothing is known.
    """
    if len(_alternatives(pattern)) > 1:
        return ()
    found: list[tuple[str, ...]] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "(":
            end = _group_end(pattern, i)
            body = pattern[i + 1:end]
            i, optional = _quantifier(pattern, end + 1)
            if not optional and not body.startswith(("?=", "?!", "?<")):
                prefixes = [_literal_prefix(alt) for alt in _alternatives(body.removeprefix("?:"))]
                if all(prefixes):
                    found.append(tuple(prefixes))
        elif char == "[":
            i, _ = _quantifier(pattern, _class_end(pattern, i) + 1)
        elif char == "\\":
            i, _ = _quantifier(pattern, i + 2)
        elif char in ".^$":
            i, _ = _quantifier(pattern, i + 1)
        else:
            literal = _literal_prefix(pattern[i:])
            if literal:
                found.append((literal,))
                i += len(literal)
            else:
                i, _ = _quantifier(pattern, i + 1)
    return tuple(found)


Rule = tuple[str, "re.Pattern[str]", tuple[tuple[str, ...], ...]]
_RULES: tuple[Rule, ...] = tuple((name, re.compile(pattern, re.IGNORECASE), anchors(pattern.lower()))
                                 for name, pattern in (*_MARKUP, *_PHRASES))
SHORT_TEXT = 800  # characters


class _AnchorIndex:
    """Which rules can match a text, from every rule's anchors (see `anchors`) looked up once.

    In a short text, testing each rule's groups one substring at a time costs more than the
    regexes they spare (~0.35 ms a fact, and a stored fact has four texts): there each anchor is
    looked for once, and only anchors starting with a pair of characters the text has. In a long
    text nearly every anchor is there, and testing rule by rule stops sooner (measured crossover
    ~800 characters).
    """

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self._needed = tuple(needed for _, _, needed in rules)
        self._groups_of_word: dict[str, list[tuple[int, int]]] = {}
        for rule, (_, _, needed) in enumerate(rules):
            for group, words in enumerate(needed):
                for word in words:
                    self._groups_of_word.setdefault(word, []).append((rule, group))
        self._group_counts = tuple(len(needed) for needed in self._needed)
        self._unanchored = tuple(rule for rule, count in enumerate(self._group_counts) if count == 0)
        self._words_by_pair: dict[str, list[str]] = {}
        for word in self._groups_of_word:
            self._words_by_pair.setdefault(word[:2], []).append(word)

    def possible(self, form: str) -> list[int]:
        """Indexes of the rules whose every anchor group has a string in `form`, in rule order."""
        if len(form) >= SHORT_TEXT:
            return [rule for rule, needed in enumerate(self._needed)
                    if all(any(word in form for word in group) for group in needed)]
        pairs = {form[i:i + 2] for i in range(len(form))} | set(form)  # single characters too
        satisfied = {group for pair in pairs if pair in self._words_by_pair for word in self._words_by_pair[pair]
                     if word in form for group in self._groups_of_word[word]}
        groups_met = Counter(rule for rule, _ in satisfied)
        met = (rule for rule, count in groups_met.items() if count == self._group_counts[rule])
        return sorted([*self._unanchored, *met])


_INDEX = _AnchorIndex(_RULES)

# The sentence our recall frame opens with (FRAME and MEMORY_NOTICE both say it): a fact that
# repeats it imitates the frame.
FRAME_PHRASE = "recalled memory: data written earlier by agents"
_SPACES = re.compile(r"\s+")


def _texts(text: str) -> list[str]:
    """The forms the rules run over: folded and lower-cased, look-alikes mapped, spacing collapsed."""
    base = folded(text)
    lowered = base.text.lower()
    forms = [lowered]
    # Only the lines a mapping changes need the second pass: dates and versions are everywhere.
    changed = [line for line in lowered.splitlines() if line.translate(_LOOKALIKES) != line]
    if changed:
        forms.append("\n".join(changed).translate(_LOOKALIKES))
    squeezed = collapsed(base)
    if squeezed is not None:
        forms.append(squeezed.text.lower().translate(_LOOKALIKES))
    return forms


def _compact(text: str) -> bool:
    squeezed = collapsed(folded(text))
    return squeezed is not None and bool(_COMPACT.search(squeezed.text.lower().translate(_LOOKALIKES)))


def instruction_reasons(text: str, *, first: bool = False) -> list[str]:
    """The names of the rules `text` matches, in rule order, each once; empty for ordinary text.

    `first`: stop at the first rule that matches (all a flag needs).
    """
    found: list[str] = []
    forms = _texts(text)
    for form in forms:
        if FRAME_PHRASE in _SPACES.sub(" ", form) and "framing delimiter" not in found:
            found.append("framing delimiter")
        for index in _INDEX.possible(form):
            name, rule, _ = _RULES[index]
            if name in found:
                continue
            if rule.search(form):
                found.append(name)
                if first:
                    return found
    for name, rule in _CASED:
        if name not in found and rule.search(folded(text).text):
            found.append(name)
    if "disregard earlier instructions" not in found and _compact(text):
        found.append("disregard earlier instructions")
    return found


def is_instruction_like(text: str) -> bool:
    """True when `text` addresses the agent reading it (see the module docstring)."""
    return bool(instruction_reasons(text, first=True))


def instruction_flags(*texts: str | None) -> list[InstructionFlag]:
    """`["instruction_like"]` when any of `texts` is instruction-like, else `[]`: the stored `flags` value."""
    return [INSTRUCTION_LIKE] if any(t and is_instruction_like(t) for t in texts) else []
